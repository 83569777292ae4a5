"""IterableDataset sharded over workers with get_worker_info; a collate_fn; worker_init_fn seeding."""
import math

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class RangeStream(IterableDataset):
    def __init__(self, start, end):
        super().__init__()
        self.start, self.end = start, end

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            lo, hi = self.start, self.end
        else:
            per = int(math.ceil((self.end - self.start) / float(info.num_workers)))
            lo = self.start + info.id * per
            hi = min(lo + per, self.end)
        for i in range(lo, hi):
            yield {"x": np.full(2, i, dtype=np.float32), "y": i % 3}


def worker_init_fn(worker_id):
    np.random.seed(np.random.get_state()[1][0] + worker_id)


def collate(batch):
    return torch.stack([torch.from_numpy(b["x"]) for b in batch]), torch.tensor([b["y"] for b in batch])


ds = RangeStream(0, 10)
single = [y.tolist() for _, y in DataLoader(ds, batch_size=4, collate_fn=collate)]
multi = sorted(int(v) for _, y in DataLoader(ds, batch_size=2, num_workers=2, collate_fn=collate,
                                             worker_init_fn=worker_init_fn) for v in y)
default = next(iter(DataLoader(ds, batch_size=3)))
RESULT = {"single": single, "multi": multi, "default_keys": sorted(default.keys()),
          "default_x": default["x"].tolist(), "default_y": default["y"].tolist()}
