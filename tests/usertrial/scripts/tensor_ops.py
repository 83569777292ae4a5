"""Tensor manipulation a data pipeline or a model's forward uses, compared value by value."""
import numpy as np
import torch

rng = np.random.RandomState(2)
x = torch.from_numpy(rng.randn(4, 5).astype(np.float32))
idx = torch.tensor([[0, 2], [1, 1], [4, 3], [0, 0]])
out = {}
out["gather"] = torch.gather(x, 1, idx).tolist()
out["scatter"] = torch.zeros(4, 5).scatter_(1, idx, 1.0).tolist()
out["scatter_add"] = torch.zeros(4, 5).scatter_add(1, idx, torch.ones(4, 2)).tolist()
out["index_select"] = x.index_select(1, torch.tensor([4, 0])).tolist()
out["masked_select"] = x.masked_select(x > 0.5).tolist()
out["nonzero"] = (x > 1).nonzero().tolist()
out["nonzero_tuple"] = [t.tolist() for t in torch.nonzero(x > 1, as_tuple=True)]
out["unique"] = torch.unique(torch.tensor([3, 1, 3, 2, 1]), return_counts=True)[1].tolist()
out["bincount"] = torch.bincount(torch.tensor([0, 1, 1, 4])).tolist()
out["cumsum"] = x.cumsum(dim=1).tolist()
out["argsort"] = x.argsort(dim=1, descending=True).tolist()
out["repeat"] = list(x.repeat(2, 1, 3).shape)
out["expand"] = list(x[:, :1].expand(-1, 3).shape)
out["chunk"] = [list(c.shape) for c in x.chunk(2, dim=1)]
out["split"] = [list(c.shape) for c in x.split([2, 3], dim=1)]
out["flip_roll"] = torch.roll(x.flip(0), shifts=1, dims=1).tolist()
out["einsum"] = torch.einsum("ij,kj->ik", x, x).tolist()
out["bmm"] = torch.bmm(x.view(2, 2, 5), x.view(2, 5, 2)).tolist()
out["outer"] = torch.outer(x[0], x[1]).sum().item()
out["tril_triu"] = [torch.tril(x).sum().item(), torch.triu(x, 1).sum().item()]
out["diag"] = torch.diag(x[:, :4]).tolist()
out["where_scalar"] = torch.where(x > 0, x, 0.0).tolist()
out["new"] = [list(x.new_zeros(2, 2).shape), x.new_ones(3).tolist(), x.new_tensor([1, 2]).dtype == torch.int64]
out["full_like"] = torch.full_like(x, 7).sum().item()
out["norms"] = [torch.norm(x).item(), torch.linalg.norm(x, dim=1).tolist(), x.norm(p=1, dim=0).tolist()]
out["stats"] = [x.std(unbiased=False).item(), x.var(dim=1, keepdim=True).tolist(), x.median().item()]
out["lse"] = torch.logsumexp(x, dim=1).tolist()
out["minmax"] = [x.amax(dim=0).tolist(), x.amin().item(), torch.max(x, dim=1).indices.tolist()]
out["topk"] = [t.tolist() for t in x.topk(2, dim=0, largest=False)]
out["sort_stable"] = torch.sort(torch.tensor([2, 1, 2, 1]), stable=True).indices.tolist()
out["meshgrid"] = [list(t.shape) for t in torch.meshgrid(torch.arange(3), torch.arange(2), indexing="ij")]
out["clamp_tensor"] = torch.clamp(x, min=torch.zeros(5), max=torch.ones(5) * 0.5).tolist()
out["isnan"] = torch.isnan(torch.tensor([1.0, float("nan")])).tolist()
out["nan_to_num"] = torch.nan_to_num(torch.tensor([float("nan"), float("inf"), 1.0]), posinf=9.0).tolist()
out["allclose"] = torch.allclose(x, x + 1e-7)
out["mm_T"] = (x.T @ x).trace().item()
out["sum_dims"] = x.view(2, 2, 5).sum(dim=(0, 2)).tolist()
out["mean_keep"] = list(x.mean(dim=-1, keepdim=True).shape)
out["prod"] = x[:, :2].prod(dim=1).tolist()
out["round"] = torch.round(x * 10, decimals=0).tolist() if hasattr(torch, "round") else None
out["int_div"] = [torch.div(torch.tensor([7, -7]), 2, rounding_mode="floor").tolist(), (torch.tensor([7, -7]) // 2).tolist()]
out["fmod"] = torch.remainder(torch.tensor([-3.0, 3.0]), 2).tolist()
out["cdist"] = torch.cdist(x[:2], x[2:]).tolist()
out["arange_float"] = torch.arange(0, 1, 0.25).tolist()
out["stack_unbind"] = [t.tolist() for t in torch.stack([x[0], x[1]]).unbind(0)]
RESULT = out
