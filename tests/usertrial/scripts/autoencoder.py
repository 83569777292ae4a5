"""Autoencoder with Sigmoid + BCELoss, AdamW, ReduceLROnPlateau, a validation loop."""
import numpy as np
import torch
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset, random_split

rng = np.random.RandomState(7)
codes_true = rng.rand(60, 2)
data = torch.tensor(1 / (1 + np.exp(-(codes_true @ rng.randn(2, 12) * 3))), dtype=torch.float32)
dataset = TensorDataset(data)
train_set, val_set = random_split(dataset, [48, 12], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=12, shuffle=True)
val_loader = DataLoader(val_set, batch_size=12)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(12, 6), nn.LeakyReLU(0.1), nn.Linear(6, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 6), nn.GELU(), nn.Linear(6, 12), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


torch.manual_seed(0)
model = sync_weights(AutoEncoder())
criterion = nn.BCELoss()
optimizer = optim.AdamW(model.parameters(), lr=3e-2, weight_decay=1e-4)
scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "min", patience=0, factor=0.5)
history = []
for epoch in range(8):
    model.train()
    for (batch,) in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(batch), batch)
        loss.backward()
        optimizer.step()
    model.eval()
    val_loss = 0.0
    with torch.no_grad():
        for (batch,) in val_loader:
            val_loss += criterion(model(batch), batch).item() * len(batch)
    val_loss /= len(val_set)
    scheduler.step(val_loss)
    history.append(val_loss)
codes = model.encoder(data[:4]).detach()
print("history", history)
RESULT = {"decreasing": history[-1] < history[0], "sizes": [len(train_set), len(val_set)],
          "code_shape": list(codes.shape), "lr_le": optimizer.param_groups[0]["lr"] <= 3e-2,
          "grad_false": codes.requires_grad is False}
