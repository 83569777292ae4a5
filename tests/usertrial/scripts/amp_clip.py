"""autocast(bf16 on CPU) + GradScaler loop with gradient clipping after unscale_."""
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
model = sync_weights(nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 3))).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 8, growth_interval=2)
x = torch.tensor([[((i * 3 + j) % 7) / 3.0 - 1.0 for j in range(6)] for i in range(12)], device=device)
y = torch.tensor([i % 3 for i in range(12)], device=device)
losses, dtypes = [], []
for step in range(5):
    optimizer.zero_grad()
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
    dtypes.append(str(out.dtype).split(".")[-1])
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    nn.utils.clip_grad_value_(model.parameters(), 0.5)
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.float().item())
with torch.no_grad():
    out32 = model(x)
RESULT = {"losses": losses, "dtypes": dtypes, "out32": str(out32.dtype).split(".")[-1],
          "loss_dtype": str(loss.dtype).split(".")[-1], "scale": float(scaler.get_scale())}
