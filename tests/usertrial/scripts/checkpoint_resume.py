"""Checkpoint dict (model + optimizer + epoch) saved mid-run; resuming matches the straight run."""
import os
import tempfile

import torch
import torch.nn as nn

X = torch.tensor([[0.1 * i, 0.2 * (i % 3), -0.05 * i] for i in range(16)])
Y = torch.tensor([[0.5 * i % 1.3] for i in range(16)])


def make():
    model = sync_weights(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=0.05, betas=(0.9, 0.99))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    return model, opt, sched


def train(model, opt, sched, epochs):
    out = []
    for _ in range(epochs):
        loss = nn.functional.mse_loss(model(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        out.append(loss.item())
    return out


model, opt, sched = make()
straight = train(model, opt, sched, 6)

model, opt, sched = make()
first = train(model, opt, sched, 3)
path = os.path.join(tempfile.mkdtemp(), "ckpt.pth")
torch.save({"epoch": 3, "model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(),
            "scheduler": sched.state_dict(), "loss": first[-1]}, path)

model, opt, sched = make()
checkpoint = torch.load(path)
model.load_state_dict(checkpoint["model_state_dict"])
opt.load_state_dict(checkpoint["optimizer_state_dict"])
sched.load_state_dict(checkpoint["scheduler"])
start_epoch = checkpoint["epoch"]
resumed = first + train(model, opt, sched, 6 - start_epoch)
state = opt.state_dict()
RESULT = {"straight": straight, "resumed": resumed, "epoch": start_epoch,
          "loss_type": type(checkpoint["loss"]).__name__,
          "opt_keys": sorted(state.keys()), "state_ids": sorted(state["state"].keys()),
          "step": float(state["state"][0]["step"]), "lr": state["param_groups"][0]["lr"]}
