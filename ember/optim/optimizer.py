"""The optimizer base class, as ``torch.optim.Optimizer``.

An optimizer holds ``param_groups`` (dicts with a ``"params"`` list and the hyper-parameters,
which users and learning-rate schedulers change between steps), ``defaults`` and ``state``
(per parameter, keyed by the parameter object). ``state_dict()`` / ``load_state_dict()`` use
torch's layout: ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``
where indices count the parameters over all groups in order.

Subclasses implement ``_update(group, p, g, state, step)``: torch's single-tensor formula
as a function of tensors (the parameter, its gradient, the state entries present, the new step
count), returning the new parameter and state; ``_counted`` says whether the optimizer keeps
``state["step"]``. ``step(closure=None)`` calls the closure (with grad mode on), runs the step
pre-hooks, every group under ``no_grad`` (``_step_group``), then the post-hooks.

How a step runs (``_foreach``, docs/optim.md): the parameters of a group that have a gradient
are bucketed by (device, dtype, state); a bucket's gradients are concatenated into one flat
vector and the update runs once over the bucket's flat parameter and state buffers (on a fused
device: one ``cat`` launch and one fused elementwise launch per bucket, whatever the number of
parameters), then the parameters and state tensors are rebound in place to views of the new
flat buffers (the objects keep their identity; a parameter stays a leaf with its ``.grad``).
Hyper-parameters are read from ``group`` at every step as Python floats, so the Fusion layer's
plan cache (which blanks float values) never recompiles when ``lr`` or the step count change.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from ..backends.autodiff.mode import enable_grad, no_grad
from ..creation import zeros_like
from ..tensor import Tensor
from ._foreach import step_group, step_tensor

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyper-parameter without a default (as ``torch.optim.optimizer.required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required: Any = _RequiredParameter()


class _RemovableHandle:
    """Removes a registered hook from its dict (as ``torch.utils.hooks.RemovableHandle``)."""

    _next_id = 0

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks = hooks
        self.id = _RemovableHandle._next_id
        _RemovableHandle._next_id += 1

    def remove(self) -> None:
        """Unregister the hook."""
        self._hooks.pop(self.id, None)

    def __enter__(self) -> _RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _with_hooks(step: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a subclass's ``step`` so the step pre- and post-hooks run around it."""

    @functools.wraps(step)
    def wrapper(self: Optimizer, *args: Any, **kwargs: Any) -> Any:
        for hook in list(self._step_pre_hooks.values()):
            res = hook(self, args, kwargs)
            if res is not None:
                if not (isinstance(res, tuple) and len(res) == 2):
                    raise RuntimeError(f"{hook} must return None or a tuple of (new_args, new_kwargs), "
                                       f"but got {res}")
                args, kwargs = res
        out = step(self, *args, **kwargs)
        self._opt_called = True  # read by the schedulers' step-order warning
        for hook in list(self._step_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    wrapper._ember_hooked = True  # type: ignore[attr-defined]
    return wrapper


def _lerp(start: Tensor, end: Tensor, weight: float) -> Tensor:
    """``start.lerp(end, weight)`` for a scalar weight, in torch's two forms (the one
    accurate at each end of the interval)."""
    if abs(weight) < 0.5:
        return start + (end - start) * weight
    return end - (end - start) * (1.0 - weight)


def _adam_prologue(group: dict[str, Any], p: Tensor, g: Tensor,
                   state: dict[str, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The first part of every Adam-family update (Adam/AdamW, NAdam, RAdam): ``maximize`` and
    the weight decay (decoupled: on ``p``; else added to ``g``) applied, and the two moments
    from ``state``. A new state starts at zeros and the update runs over it as over any other,
    so the first step's values are torch's bit for bit (lerp's two forms differ at 0).
    Returns ``(p, g, exp_avg, exp_avg_sq)``."""
    wd = group["weight_decay"]
    if group["maximize"]:
        g = -g
    if wd != 0:
        if group["decoupled_weight_decay"]:
            p = p * (1 - group["lr"] * wd)
        else:
            g = g + p * wd
    exp_avg = state.get("exp_avg")
    if exp_avg is None:
        exp_avg = zeros_like(p)
    exp_avg_sq = state.get("exp_avg_sq")
    if exp_avg_sq is None:
        exp_avg_sq = zeros_like(p)
    return p, g, exp_avg, exp_avg_sq


class Optimizer:
    """Base class of all optimizers, as ``torch.optim.Optimizer``.

    ``params`` is an iterable of tensors or of dicts (parameter groups, each with a
    ``"params"`` entry and optional per-group hyper-parameters); ``defaults`` fills the
    hyper-parameters a group does not set. Named parameters (``(name, tensor)`` pairs) are
    not supported.
    """

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._step_pre_hooks: OrderedDict[int, Any] = OrderedDict()
        self._step_post_hooks: OrderedDict[int, Any] = OrderedDict()
        #: per group: the flat buffers of its parameters (``_foreach``), a cache of the state
        self._buckets: dict[int, Any] = {}
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _with_hooks(step)  # type: ignore[method-assign]

    def __repr__(self) -> str:
        lines = [self.__class__.__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group (as ``torch.optim.Optimizer.add_param_group``)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            param_group.setdefault(name, default)
        ids = [id(p) for p in param_group["params"]]
        if len(set(ids)) != len(ids):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          "cause an error", UserWarning, stacklevel=3)
        seen: set[int] = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------------ gradients
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (as torch): drop them
        (``set_to_none=True``) or zero them in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if g.requires_grad:
                        g.requires_grad_(False)
                    g.zero_()

    # ------------------------------------------------------------------ stepping
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One optimization step over every group (as torch); returns the closure's loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    #: whether the optimizer keeps ``state["step"]`` (a host float32 0-d tensor, as torch)
    _counted = True

    def _step_group(self, group: dict[str, Any]) -> None:
        """One step of ``group`` (under ``no_grad``): ``_update`` over flat buckets."""
        step_group(self, group, self._update, self._counted, True)

    def _update(self, group: dict[str, Any], p: Tensor, g: Tensor, state: dict[str, Tensor],
                step: float | None) -> tuple[Tensor, dict[str, Tensor]]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    # ------------------------------------------------------------------ hooks
    def register_step_pre_hook(self, hook: Callable[..., Any]) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before every ``step``; it may return new
        ``(args, kwargs)``. Returns a handle whose ``remove()`` unregisters it."""
        h = _RemovableHandle(self._step_pre_hooks)
        self._step_pre_hooks[h.id] = hook
        return h

    def register_step_post_hook(self, hook: Callable[..., Any]) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after every ``step``."""
        h = _RemovableHandle(self._step_post_hooks)
        self._step_post_hooks[h.id] = hook
        return h

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """The state in torch's layout. As in torch, the tensors are the live state tensors
        (a later step updates them): save or clone the dict to keep a snapshot."""
        mapping: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                if id(p) not in mapping:
                    mapping[id(p)] = len(mapping)
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {mapping[id(p)]: dict(s) for p, s in self.state.items() if id(p) in mapping}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a ``state_dict()`` (as torch): state tensors are copied onto each parameter's
        device (floating point ones cast to its dtype; ``step`` stays a host float32)."""
        groups = self.param_groups
        saved = state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        id_map: dict[int, Tensor] = {}
        for g, s in zip(groups, saved):
            for i, p in zip(s["params"], g["params"]):
                id_map[int(i)] = p
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for k, v in state_dict["state"].items():
            p = id_map.get(int(k))
            if p is None:
                continue
            state[p] = {name: _cast_state(p, name, value) for name, value in v.items()}
        new_groups = []
        for g, s in zip(groups, saved):
            ng = {k: v for k, v in s.items() if k != "params"}
            for name, default in self.defaults.items():
                ng.setdefault(name, default)
            ng["params"] = g["params"]
            new_groups.append(ng)
        self.state = state
        self.param_groups = new_groups
        self._buckets.clear()


Optimizer.step = _with_hooks(Optimizer.step)  # type: ignore[method-assign]


def _cast_state(p: Tensor, name: str, value: Any) -> Any:
    """A loaded state entry as the optimizer keeps it: a fresh tensor object (so the loaded
    dict and the optimizer never share one), on ``p``'s device; floating point values in
    ``p``'s dtype. ``step`` becomes the host float32 counter."""
    if name == "step":
        return step_tensor(float(value.item() if isinstance(value, Tensor) else value))
    if not isinstance(value, Tensor):
        return value
    t = value.to(device=p.device)
    if t.dtype.is_floating_point:
        t = t.to(p.dtype)
    return t.detach()


def _check(ok: bool, what: str, value: Any) -> None:
    """torch's argument checks: ``ValueError("Invalid <what>: <value>")`` unless ``ok``."""
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


def _no_graph_options(differentiable: bool = False, capturable: bool = False) -> None:
    """``differentiable`` (a step recorded by autograd) and ``capturable`` (CUDA graph capture)
    are torch options ember does not implement; ``foreach`` and ``fused`` are accepted and
    ignored (every step is the multi-tensor one, ``_foreach``)."""
    if differentiable:
        raise ValueError("differentiable=True is not supported by ember's optimizers")
    if capturable:
        raise ValueError("capturable=True is not supported by ember's optimizers (no CUDA graph capture)")
