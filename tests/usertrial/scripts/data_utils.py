"""Datasets and samplers: Subset, ConcatDataset, random_split fractions, WeightedRandomSampler, workers."""
import numpy as np
import torch
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset, WeightedRandomSampler, random_split

x = torch.arange(20, dtype=torch.float32).view(10, 2)
y = torch.arange(10)
ds = TensorDataset(x, y)
sub = Subset(ds, [0, 2, 4])
both = ConcatDataset([ds, sub])
info = {"len": [len(ds), len(sub), len(both)], "last": [both[12][0].tolist(), int(both[12][1])]}
a, b = random_split(ds, [0.7, 0.3], generator=torch.Generator().manual_seed(1))
info["split"] = [len(a), len(b), sorted(a.indices + b.indices) == list(range(10))]
weights = [0.0 if i % 2 else 1.0 for i in range(10)]
sampler = WeightedRandomSampler(weights, num_samples=8, replacement=True)
drawn = [int(v) for v in sampler]
info["weighted_even"] = all(i % 2 == 0 for i in drawn) and len(drawn) == 8
loader = DataLoader(ds, batch_size=4, shuffle=True, drop_last=False)
seen = torch.cat([yb for _, yb in loader])
info["shuffle_perm"] = sorted(seen.tolist()) == list(range(10))
info["n_batches"] = len(loader)
g = torch.Generator()
g.manual_seed(0)
l1 = [yb.tolist() for _, yb in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
g.manual_seed(0)
l2 = [yb.tolist() for _, yb in DataLoader(ds, batch_size=5, shuffle=True, generator=g)]
info["gen_repeat"] = l1 == l2
np_ds = [(np.float32(i), np.array([i, i + 1])) for i in range(6)]
nb = next(iter(DataLoader(np_ds, batch_size=3)))
info["np_collate"] = [nb[0].dtype == torch.float32, list(nb[1].shape), nb[1].dtype == torch.int64]
worker_loader = DataLoader(ds, batch_size=5, num_workers=2, persistent_workers=False)
info["workers"] = [yb.tolist() for _, yb in worker_loader]
tuples = DataLoader([(1, 2.5, "a"), (3, 4.5, "b")], batch_size=2)
t0, t1, t2 = next(iter(tuples))
info["py_collate"] = [t0.dtype == torch.int64, t1.dtype == torch.float64, t2]
RESULT = info
