"""Odds and ends scripts reach for: seeding helpers, no_grad decorator, numel counts, type checks."""
import random

import numpy as np
import torch
import torch.nn as nn


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


set_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def evaluate(m, x):
    return m(x)


x = torch.randn(4, 3)
out = evaluate(model, x)
info = {"n_params": n_params, "no_grad_dec": out.requires_grad, "is_tensor": torch.is_tensor(out),
        "isinstance": isinstance(out, torch.Tensor), "param_is_tensor": isinstance(model[0].weight, torch.Tensor),
        "param_cls": isinstance(model[0].weight, nn.Parameter), "dtype_eq": out.dtype == torch.float,
        "long_eq": torch.tensor([1]).dtype == torch.long, "threads": torch.get_num_threads() >= 1}
info["finfo"] = [torch.finfo(torch.float32).eps, torch.finfo(torch.float16).max, torch.iinfo(torch.int32).max]
info["size"] = [x.size() == torch.Size([4, 3]), x.shape[-1], x.numel()]
info["grad_enabled"] = torch.is_grad_enabled()
model.zero_grad()
info["grad_none"] = all(p.grad is None for p in model.parameters())
loss = model(x).pow(2).mean()
loss.backward()
info["grad_set"] = all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
model.zero_grad(set_to_none=False)
info["grad_zero"] = all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in model.parameters())
w = model[0].weight
with torch.no_grad():
    w.mul_(0.5)
    w[0, 0] = 1.0
info["w00"] = w[0, 0].item()
info["leaf"] = [w.is_leaf, w.requires_grad, loss.is_leaf]
info["detach_np"] = list(loss.detach().numpy().shape)
info["item_type"] = type(loss.item()).__name__
info["print"] = str(torch.tensor([1.5, 2.0])).startswith("tensor([1.5")
info["numpy_float"] = torch.tensor(np.float64(2.5)).item()
info["np_array_tensor"] = torch.tensor(np.array([1, 2], dtype=np.int32)).dtype == torch.int32
info["np_dtype"] = str(torch.tensor([1.0]).numpy().dtype)
info["cat_list"] = torch.cat([torch.ones(2), torch.zeros(1)]).tolist()
info["legacy"] = [torch.FloatTensor([1, 2]).dtype == torch.float32, torch.LongTensor([1, 2]).dtype == torch.int64]
info["printopt"] = torch.set_printoptions(precision=3) is None
RESULT = info
