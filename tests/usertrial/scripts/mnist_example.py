"""pytorch/examples' MNIST recipe: Conv net, Adadelta, StepLR(gamma=0.7), log_softmax + nll_loss(sum)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from sklearn.datasets import load_digits
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, device, loader, optimizer, epoch):
    model.train()
    total = 0.0
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        model.dropout1.p = 0.0  # the two frameworks draw different masks
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def test(model, device, loader):
    model.eval()
    test_loss, correct = 0, 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / len(loader.dataset), correct


use_cuda = torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")
kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True} if use_cuda else {}
digits = load_digits()
images = torch.tensor(digits.images[:160], dtype=torch.float32).unsqueeze(1) / 16.0
images = (images - 0.1307) / 0.3081
labels = torch.tensor(digits.target[:160], dtype=torch.long)
train_loader = DataLoader(TensorDataset(images[:128], labels[:128]), batch_size=32, **kwargs)
test_loader = DataLoader(TensorDataset(images[128:], labels[128:]), batch_size=64)
torch.manual_seed(1)
model = sync_weights(Net()).to(device)
optimizer = optim.Adadelta(model.parameters(), lr=1.0)
scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
history = []
for epoch in range(1, 4):
    train_loss = train(model, device, train_loader, optimizer, epoch)
    test_loss, correct = test(model, device, test_loader)
    scheduler.step()
    history.append([train_loss, test_loss, correct])
RESULT = {"history": history, "lr": scheduler.get_last_lr()}
