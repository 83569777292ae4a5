"""A tiny GAN step loop: two optimizers, detach(), BCELoss against ones_like/zeros_like."""
import torch
import torch.nn as nn

torch.manual_seed(0)
latent = 4
G = sync_weights(nn.Sequential(nn.Linear(latent, 8), nn.ReLU(), nn.Linear(8, 2)))
D = sync_weights(nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1), nn.Sigmoid()))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
criterion = nn.BCELoss()
real = torch.tensor([[1.0 + 0.1 * (i % 5), -1.0 + 0.05 * i] for i in range(16)])
z_all = torch.tensor([[((i * 13 + j * 7) % 17) / 8.5 - 1.0 for j in range(latent)] for i in range(16)])
d_losses, g_losses = [], []
for step in range(6):
    fake = G(z_all)
    d_real = D(real)
    d_fake = D(fake.detach())
    loss_d = criterion(d_real, torch.ones_like(d_real)) + criterion(d_fake, torch.zeros_like(d_fake))
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()

    d_out = D(fake)
    loss_g = criterion(d_out, torch.ones_like(d_out))
    opt_g.zero_grad()
    loss_g.backward()
    opt_g.step()
    d_losses.append(loss_d.item())
    g_losses.append(loss_g.item())
    if step % 2 == 0:
        print(f"[{step}] loss_D: {loss_d.item():.4f} loss_G: {loss_g.item():.4f}")
RESULT = {"d": d_losses, "g": g_losses, "fake_grad": fake.requires_grad,
          "d_grad_none": all(p.grad is not None for p in D.parameters())}
