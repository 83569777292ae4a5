"""A custom Dataset returning dicts of numpy arrays and python ints; default collate."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class PointsDataset(Dataset):
    def __init__(self, n):
        rng = np.random.RandomState(1)
        self.x = rng.randn(n, 3).astype(np.float32)
        self.y = (self.x @ np.array([1.0, -2.0, 0.5], dtype=np.float32) + 0.3).astype(np.float32)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return {"features": self.x[idx], "target": self.y[idx], "index": idx, "name": f"p{idx}"}


class PairDataset(Dataset):
    def __init__(self, base):
        self.base = base

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        item = self.base[i]
        return torch.from_numpy(item["features"]), float(item["target"]), i % 2


ds = PointsDataset(40)
loader = DataLoader(ds, batch_size=8)
batch = next(iter(loader))
print({k: (type(v).__name__, getattr(v, "dtype", None)) for k, v in batch.items()})
info = {
    "keys": sorted(batch.keys()),
    "feat_shape": list(batch["features"].shape),
    "feat_is_f32": batch["features"].dtype == torch.float32,
    "index_is_i64": batch["index"].dtype == torch.int64,
    "index": batch["index"].tolist(),
    "name": batch["name"],
}
pairs = DataLoader(PairDataset(ds), batch_size=8, shuffle=False)
xb, yb, parity = next(iter(pairs))
info["pair_types"] = [xb.dtype == torch.float32, yb.dtype == torch.float64, parity.dtype == torch.int64]
info["pair_shapes"] = [tuple(xb.shape), tuple(yb.shape), tuple(parity.shape)]

model = sync_weights(nn.Linear(3, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.MSELoss()
losses = []
for epoch in range(5):
    for b in loader:
        pred = model(b["features"]).squeeze(-1)
        loss = loss_fn(pred, b["target"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    losses.append(loss.item())
info["losses"] = losses
info["len"] = len(ds)
RESULT = info
