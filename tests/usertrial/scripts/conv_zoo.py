"""A residual CNN and a tiny UNet: kaiming init, BatchNorm, AdaptiveAvgPool, ConvTranspose, interpolate."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNetTiny(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True))
        self.layer1 = BasicBlock(4, 4)
        self.layer2 = BasicBlock(4, 8, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class UNetTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.SiLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Conv2d(4, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, kernel_size=2, stride=2)
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        d = self.down(x)
        m = F.leaky_relu(self.mid(self.pool(d)), 0.1)
        u = self.up(m)
        y = self.out(torch.cat([u, d], dim=1))
        return y + F.interpolate(F.avg_pool2d(x, 2), scale_factor=2, mode="bilinear", align_corners=False)


g = torch.Generator().manual_seed(0)
images = torch.linspace(-1, 1, 6 * 3 * 8 * 8).reshape(6, 3, 8, 8).sin()
labels = torch.tensor([0, 1, 2, 0, 1, 2])
net = sync_weights(ResNetTiny())
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4, nesterov=True)
losses = []
for step in range(4):
    net.train()
    loss = F.cross_entropy(net(images), labels, label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
net.eval()
with torch.no_grad():
    eval_logits = net(images)
unet = sync_weights(UNetTiny())
uopt = torch.optim.Adam(unet.parameters(), lr=1e-2)
target = images[:, :1].flip(-1)
ulosses = []
for step in range(4):
    loss = F.l1_loss(unet(images[:, :1]), target)
    uopt.zero_grad()
    loss.backward()
    uopt.step()
    ulosses.append(loss.item())
RESULT = {"losses": losses, "eval": eval_logits.tolist(), "ulosses": ulosses,
          "running_var": net.layer2.bn1.running_var.tolist(), "unet_shape": list(unet(images[:, :1]).shape)}
