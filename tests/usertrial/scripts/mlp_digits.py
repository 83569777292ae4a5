"""MNIST-style MLP on sklearn digits: DataLoader, CrossEntropyLoss, SGD(momentum), StepLR, save/load."""
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

digits = load_digits()
X = torch.tensor(digits.data[:256] / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target[:256])
train_ds = TensorDataset(X[:192], y[:192])
test_ds = TensorDataset(X[192:], y[192:])
train_loader = DataLoader(train_ds, batch_size=32, shuffle=False)
test_loader = DataLoader(test_ds, batch_size=64)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = x.view(-1, 64)
        return self.fc2(torch.relu(self.fc1(x)))


model = sync_weights(MLP()).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

losses = []
for epoch in range(3):
    model.train()
    running = 0.0
    for data, target in train_loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()
        running += loss.item() * data.size(0)
    scheduler.step()
    losses.append(running / len(train_loader.dataset))

    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            pred = model(data).argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    acc = 100.0 * correct / len(test_loader.dataset)
    print(f"epoch {epoch} loss {losses[-1]:.4f} acc {acc:.1f}% lr {scheduler.get_last_lr()[0]}")

path = os.path.join(tempfile.mkdtemp(), "mlp.pt")
torch.save(model.state_dict(), path)
model2 = MLP()
model2.load_state_dict(torch.load(path))
model2.eval()
sd = model2.state_dict()
sd["extra.weight"] = torch.zeros(1)
del sd["fc2.bias"]
result = model2.load_state_dict(sd, strict=False)
with torch.no_grad():
    same = torch.allclose(model2(X[192:]), model(X[192:].to(device)).cpu())
RESULT = {"losses": losses, "acc": acc, "same": same, "missing": list(result.missing_keys),
          "unexpected": list(result.unexpected_keys), "lr": scheduler.get_last_lr()}
