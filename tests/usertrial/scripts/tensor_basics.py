"""Everyday tensor handling: printing, conversions, attributes, masks and in-place updates."""
import numpy as np
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
a = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
print(a)
print(a.shape, a.size(), a.size(0), a.dtype, a.device)
info = {"repr_starts": repr(a).startswith("tensor("), "shape": list(a.shape), "size1": a.size(1),
        "ndim": a.ndim, "dim": a.dim(), "numel": a.numel(), "is_f32": a.dtype == torch.float32,
        "is_cuda": a.is_cuda, "size_eq": a.size() == (2, 3), "shape_tuple": tuple(a.shape) == (2, 3)}
arr = np.arange(6, dtype=np.float32).reshape(2, 3)
t = torch.from_numpy(arr)
info["from_numpy"] = t.tolist()
info["numpy_back"] = (t.numpy() == arr).all().item()
info["as_tensor"] = torch.as_tensor([1, 2, 3]).dtype == torch.int64
info["tensor_float"] = torch.tensor([1, 2.5]).dtype == torch.float32
info["tensor_bool"] = torch.tensor([True, False]).dtype == torch.bool
b = a.clone()
mask = b < 0
info["mask_sum"] = mask.sum().item()
b[mask] = 0
info["masked"] = b.tolist()
b.add_(1).mul_(2)
info["inplace"] = b.tolist()
b[0, 1] = 7.5
b[:, 2] += 1
info["setitem"] = b.tolist()
b.clamp_(max=10)
info["clamped"] = b.tolist()
c = torch.zeros(4, dtype=torch.long)
c[1:3] = torch.tensor([5, 6])
info["long_slice"] = c.tolist()
idx = torch.tensor([1, 0, 1])
info["fancy"] = a[idx].tolist()
info["mask_sel"] = a[a > 0].tolist()
info["col"] = a[:, 1].tolist()
info["ellipsis"] = list(a[..., None].shape)
info["item"] = a[1, 2].item()
info["int"] = int(a.argmax())
info["float"] = float(a.sum())
info["len"] = len(a)
info["iter"] = [row.tolist() for row in a]
info["max_dim"] = [v.tolist() for v in a.max(dim=1)]
info["max_vals"] = a.max(dim=0).values.tolist()
info["type"] = a.long().dtype == torch.int64 and a.int().dtype == torch.int32 and a.double().dtype == torch.float64
info["half"] = a.half().dtype == torch.float16 and a.bfloat16().dtype == torch.bfloat16
info["to_dtype"] = a.to(torch.float64).dtype == torch.float64
info["to_device"] = a.to(device).tolist() == a.tolist()
info["detach_np"] = a.detach().cpu().numpy().tolist()
info["zeros_like"] = torch.zeros_like(a).sum().item() + torch.ones_like(a).sum().item()
info["arange"] = torch.arange(0, 10, 3).tolist()
info["linspace"] = torch.linspace(0, 1, 5).tolist()
info["eye"] = torch.eye(2).tolist()
info["full"] = torch.full((2, 2), 3.0).tolist()
info["unsq"] = list(a.unsqueeze(0).shape) + list(a.squeeze().shape)
info["T"] = a.T.tolist()
info["mean_std"] = [round(a.mean().item(), 5), round(a.std().item(), 5)]
info["sort"] = torch.sort(a, dim=1, descending=True).values.tolist()
info["eq"] = torch.equal(a, a.clone()) and torch.allclose(a, a + 1e-9)
info["isfloat"] = torch.is_tensor(a) and a.is_floating_point()
info["std_shape"] = list(torch.randn(3, 4).mean(0).shape)
g = torch.Generator().manual_seed(0)
r1 = torch.randn(3, generator=g)
g.manual_seed(0)
info["gen_repeat"] = torch.equal(r1, torch.randn(3, generator=g))
info["randint"] = list(torch.randint(0, 10, (3,)).shape)
info["bool_any"] = (a > 4).any().item() and not (a > 10).all().item()
RESULT = info
