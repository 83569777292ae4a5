"""``linear`` and ``bilinear`` (as torch.nn.functional).

``linear`` is ``x @ weight.T + bias``: a matmul followed by an elementwise add, the form the
Fusion layer applies in the matmul's epilogue (a following activation joins it)."""

from __future__ import annotations

from ...tensor import Tensor, _autocast

__all__ = ["linear", "bilinear"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.linear: ``input @ weight.T + bias``. Inputs of more than two
    dims are multiplied as one 2-D ``(prod(lead), in) @ (in, out)`` matmul (a view in and out)
    rather than a batched one with the weight broadcast; the bias add follows the matmul
    directly, so fused devices apply it in the matmul's epilogue."""
    if _autocast.active:
        input, weight, bias = _autocast.lower(input, weight, bias)
    nd = input.ndim
    if nd > 2:
        lead = input.shape[:-1]
        out = input.reshape(-1, input.shape[-1]).matmul(weight.T)
        if bias is not None:
            out = out + bias
        return out.reshape(lead + (weight.shape[0],))
    out = input.matmul(weight.T)
    return out if bias is None else out + bias


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """As torch.nn.functional.bilinear: ``y[..., k] = x1 @ weight[k] @ x2 + bias[k]``
    (``weight`` of shape ``(out, in1, in2)``; any leading dims shared by the inputs)."""
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear: input features {input1.shape[-1]}, {input2.shape[-1]} do not match the "
                           f"weight's {in1}, {in2}")
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear: input batch dimensions {input1.shape[:-1]} and {input2.shape[:-1]} differ")
    lead = input1.shape[:-1]
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    # (B, in1) @ (in1, out*in2) -> (B, out, in2), then contract in2 with x2
    w = weight.permute(1, 0, 2).reshape(in1, out_f * in2)
    t = x1.matmul(w).reshape(-1, out_f, in2)
    y = (t * x2.unsqueeze(1)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(lead + (out_f,))
