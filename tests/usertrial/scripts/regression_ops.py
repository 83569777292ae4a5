"""Regression with MSE/SmoothL1/BCEWithLogits(pos_weight) and everyday tensor ops."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rng = np.random.RandomState(3)
X = torch.from_numpy(rng.randn(24, 4)).float().to(device)
w_true = torch.tensor([[1.5], [-2.0], [0.5], [0.0]], device=device)
y = X @ w_true + 0.1
cls = (y.squeeze(1) > 0).long()
onehot = F.one_hot(cls, num_classes=2).float()

net = sync_weights(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))).to(device)
mse, huber = nn.MSELoss(), nn.SmoothL1Loss(beta=0.5)
bce = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0, 1.0]))
opt = torch.optim.RMSprop(net.parameters(), lr=0.01)
losses = []
for step in range(6):
    out = net(X)
    reg, logit = out[:, :1], out[:, 1:]
    loss = mse(reg, y) + huber(reg.view(-1), y.reshape(-1)) + bce(logit, onehot)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())

with torch.no_grad():
    out = net(X)
    clipped = torch.clamp(out, min=-1.0, max=1.0)
    signs = torch.where(out > 0, torch.ones_like(out), -torch.ones_like(out))
    stacked = torch.stack([out, clipped], dim=0)
    joined = torch.cat([out, signs], dim=1)
    perm = stacked.permute(1, 2, 0).contiguous()
    as_long = (out * 10).long()
    back = as_long.float() / 10
    frac = (back - out).abs().max().item()
    pred = torch.sigmoid(out[:, 1:]) > 0.5
    acc = (pred.float().argmax(dim=1) == cls).float().mean()

RESULT = {
    "losses": losses,
    "clipped_max": clipped.max().item(),
    "signs_sum": signs.sum().item(),
    "shapes": [list(stacked.shape), list(joined.shape), list(perm.shape)],
    "dtypes": [str(as_long.dtype).replace("torch.", "").replace("ember.", ""), out.dtype == torch.float32],
    "frac_ok": frac < 0.1,
    "acc": acc.item(),
    "onehot_dtype_i64": F.one_hot(cls).dtype == torch.int64,
    "cpu_same": torch.equal(out.to("cpu"), out.cpu()),
}
