"""Saving and loading: map_location, weights_only, whole checkpoints, a BytesIO buffer, strict errors."""
import io
import os
import tempfile

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
model(torch.randn(5, 4))  # BatchNorm statistics move
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "model.pth")
torch.save(model.state_dict(), path)
state = torch.load(path, map_location=device, weights_only=True)
model2 = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2)).to(device)
model2.load_state_dict(state)
model.eval()
model2.eval()
x = torch.randn(2, 4)
info = {"keys": list(state.keys()), "same": torch.allclose(model(x), model2(x.to(device))),
        "nbt": int(state["1.num_batches_tracked"])}
buf = io.BytesIO()
torch.save({"w": torch.ones(2, 2), "step": 7}, buf)
buf.seek(0)
loaded = torch.load(buf)
info["buffer"] = [loaded["w"].sum().item(), loaded["step"]]
try:
    nn.Linear(4, 5).load_state_dict(nn.Linear(4, 3).state_dict())
    info["size_error"] = None
except RuntimeError as e:
    info["size_error"] = "size mismatch" in str(e)
try:
    nn.Linear(4, 3).load_state_dict({"weight": torch.zeros(3, 4)})
    info["missing_error"] = None
except RuntimeError as e:
    info["missing_error"] = "Missing key(s)" in str(e)
res = nn.Linear(4, 3).load_state_dict({"weight": torch.zeros(3, 4)}, strict=False)
info["missing"] = res.missing_keys
sd = model.state_dict()
info["sd_type"] = type(sd).__name__
info["requires_grad_in_sd"] = any(v.requires_grad for v in sd.values())
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model.train()
model(torch.randn(5, 4)).sum().backward()
opt.step()
torch.save(opt.state_dict(), os.path.join(tmp, "opt.pth"))
opt2 = torch.optim.SGD(model.parameters(), lr=0.5)
opt2.load_state_dict(torch.load(os.path.join(tmp, "opt.pth")))
info["opt_lr"] = opt2.param_groups[0]["lr"]
info["opt_mom"] = opt2.param_groups[0]["momentum"]
RESULT = info
