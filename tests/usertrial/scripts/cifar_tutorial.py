"""The classic CIFAR tutorial loop: torch.max(outputs.data, 1), DCGAN-style init through .data."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.backends.cudnn.benchmark = True
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print(device)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.pool = nn.AvgPool2d(2, 2)
        self.fc1 = nn.Linear(4 * 3 * 3, 12)
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = x.view(x.size(0), -1)
        x = F.dropout(F.relu(self.fc1(x)), p=0.5, training=self.training)
        return self.fc2(x)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("Linear") != -1:
        m.weight.data.uniform_(-0.1, 0.1)
        m.bias.data.fill_(0)


net = Net()
net.apply(weights_init)
init_std = net.conv1.weight.std().item()
bias_zero = net.fc1.bias.abs().sum().item()
net = sync_weights(net).to(device)
rng = np.random.RandomState(0)
inputs_all = torch.from_numpy(rng.rand(24, 3, 8, 8).astype("float32"))
labels_all = torch.from_numpy(rng.randint(0, 3, size=24))
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
losses = []
for epoch in range(3):
    running_loss = 0.0
    for i in range(0, 24, 8):
        inputs, labels = inputs_all[i:i + 8].to(device), labels_all[i:i + 8].to(device)
        optimizer.zero_grad()
        net.eval()  # dropout off so the two frameworks see the same function
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
    losses.append(running_loss)

correct = 0
total = 0
with torch.no_grad():
    outputs = net(inputs_all.to(device))
    _, predicted = torch.max(outputs.data, 1)
    total += labels_all.size(0)
    correct += (predicted == labels_all.to(device)).sum().item()
class_correct = list(0. for i in range(3))
c = (predicted == labels_all).squeeze()
for i in range(24):
    class_correct[labels_all[i]] += c[i].item()
net.train()
train_out = net(inputs_all)
RESULT = {"losses": losses, "correct": correct, "total": total, "class_correct": class_correct,
          "init_std_ok": 0.005 < init_std < 0.05, "bias_zero": bias_zero, "device_type": device.type in ("cpu", "flex"),
          "train_shape": list(train_out.shape)}
