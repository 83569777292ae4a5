"""Small CNN with BatchNorm/Dropout, Adam, shuffled DataLoader; loss must go down."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
rng = np.random.RandomState(0)
images = rng.rand(96, 1, 8, 8).astype(np.float32)
labels = (images[:, 0, :4].mean(axis=(1, 2)) > images[:, 0, 4:].mean(axis=(1, 2))).astype(np.int64)
dataset = TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
loader = DataLoader(dataset, batch_size=16, shuffle=True, drop_last=True)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 8, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.dropout = nn.Dropout(0.25)
        self.fc = nn.Linear(8 * 3 * 3, 2)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = self.dropout(x)
        return F.log_softmax(self.fc(x), dim=1)


model = Net().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
epoch_losses = []
for epoch in range(4):
    model.train()
    total = 0.0
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        total += loss.item()
    epoch_losses.append(total / len(loader))

model.eval()
with torch.no_grad():
    out = model(torch.from_numpy(images).to(device))
    acc = (out.argmax(1) == torch.from_numpy(labels).to(device)).float().mean().item()
print("losses", epoch_losses, "acc", acc)
print(model.bn1.running_mean.shape, model.bn1.num_batches_tracked.item())
RESULT = {"decreasing": epoch_losses[-1] < epoch_losses[0], "nbt": model.bn1.num_batches_tracked.item(),
          "acc_ok": acc > 0.5, "len_loader": len(loader)}
