"""Module containers, buffers, named_* walks, apply(init), freezing, param groups, lr edits."""
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + torch.tanh(self.lin(x)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(6) for _ in range(2)])
        self.heads = nn.ModuleDict({"a": nn.Linear(6, 2), "b": nn.Linear(6, 3)})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(6)) for _ in range(2)])
        self.register_buffer("offset", torch.zeros(6))
        self.register_buffer("steps", torch.tensor(0), persistent=False)

    def forward(self, x, head="a"):
        for blk, s in zip(self.blocks, self.scales):
            x = blk(x) * s
        self.steps += 1
        return self.heads[head](x + self.offset)


def init_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_uniform_(m.weight)
        nn.init.zeros_(m.bias)


torch.manual_seed(0)
model = Model()
model.apply(init_weights)
model = sync_weights(model)
info = {
    "params": [(n, tuple(p.shape)) for n, p in model.named_parameters()],
    "modules": [n for n, _ in model.named_modules()],
    "children": [type(c).__name__ for c in model.children()],
    "state_keys": list(model.state_dict().keys()),
    "buffers": [n for n, _ in model.named_buffers()],
    "n_params": sum(p.numel() for p in model.parameters()),
}
model.blocks[0].requires_grad_(False)
info["trainable"] = sum(p.numel() for p in model.parameters() if p.requires_grad)

optimizer = torch.optim.SGD([
    {"params": [p for p in model.blocks.parameters() if p.requires_grad]},
    {"params": model.heads.parameters(), "lr": 0.05},
    {"params": model.scales.parameters(), "lr": 0.01, "momentum": 0.5},
], lr=0.1, momentum=0.9)
g = torch.Generator().manual_seed(0)
x = torch.tensor([[0.1 * ((i * 7 + j * 3) % 11) - 0.5 for j in range(6)] for i in range(8)])
ya = torch.tensor([i % 2 for i in range(8)])
yb = torch.tensor([i % 3 for i in range(8)])
losses = []
for step in range(6):
    if step == 3:
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * 0.5
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x, "a"), ya) + nn.functional.cross_entropy(model(x, head="b"), yb)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
info["frozen_grad_none"] = model.blocks[0].lin.weight.grad is None
info["losses"] = losses
info["steps"] = int(model.steps)
info["lrs"] = [g["lr"] for g in optimizer.param_groups]
info["noise_shape"] = list(torch.randn(2, 3, generator=g).shape)
print(model)
RESULT = info
