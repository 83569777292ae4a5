"""EMA weights via .data, gradient accumulation, forward hooks, deepcopy, a custom Optimizer subclass."""
import copy

import torch
import torch.nn as nn


class PlainSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.0):
        defaults = dict(lr=lr, momentum=momentum)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                buf = state["buf"]
                buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(buf, alpha=-group["lr"])
        return loss


torch.manual_seed(0)
model = sync_weights(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
ema = copy.deepcopy(model)
for p in ema.parameters():
    p.requires_grad_(False)
features = {}


def save_hook(name):
    def hook(module, inputs, output):
        features[name] = output.detach()
    return hook


handle = model[1].register_forward_hook(save_hook("relu"))
opt = PlainSGD(model.parameters(), lr=0.05, momentum=0.9)
X = torch.tensor([[((i + j) % 5) / 4.0 for j in range(4)] for i in range(16)])
Y = torch.tensor([i % 2 for i in range(16)])
accum, losses, decay = 2, [], 0.9
opt.zero_grad()
for i in range(8):
    xb, yb = X[(i % 4) * 4:(i % 4) * 4 + 4], Y[(i % 4) * 4:(i % 4) * 4 + 4]
    loss = nn.functional.cross_entropy(model(xb), yb) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for ema_p, p in zip(ema.parameters(), model.parameters()):
                ema_p.data.mul_(decay).add_(p.data, alpha=1 - decay)
    losses.append(loss.item() * accum)
handle.remove()
features.clear()
model(X)
with torch.no_grad():
    ema_out = ema(X)
extractor = nn.Sequential(*list(model.children())[:-1])
RESULT = {"losses": losses, "ema": ema_out.sum().item(), "hook_removed": len(features) == 0,
          "extract_shape": list(extractor(X).shape), "ema_grad": ema[0].weight.requires_grad,
          "state_len": len(opt.state), "differs": not torch.equal(ema[0].weight, model[0].weight)}
