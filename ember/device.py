"""The device facade: devices are values naming a backend stack.

Construction is lazy: ``Device.cpu()`` builds nothing; the first tensor on it (or an explicit
``device.init()``) builds the stack through ``ember.backends.dispatch`` and initialises its
runtime. Initialisation errors are raised on the calling thread as typed errors.
"""

from __future__ import annotations

import os
from typing import Any

from .device_kind import DeviceKind, parse_kind

__all__ = ["Device", "DeviceKind", "WgpuOptions"]

_CHECKPOINTING = {"none": "None", "balanced": "Balanced"}


class Device:
    """A device: which backend stack runs the ops of tensors placed on it.

    ``spec`` is a nested tuple: ``("flex",)``, ``("cube", runtime, args, fusion)`` or
    ``("autodiff", inner_spec, checkpointing)``. Equal specs are the same device.
    """

    __slots__ = ("spec", "_hash", "_stack")

    def __init__(self, spec: tuple[Any, ...]) -> None:
        self.spec = spec
        self._hash = hash(spec)
        self._stack: Any = None

    # ------------------------------------------------------------------ constructors
    @staticmethod
    def flex() -> Device:
        """The eager numpy backend (the reference)."""
        return Device(("flex",))

    @staticmethod
    def lazy_flex() -> Device:
        """Flex behind the Fusion decorator: ops queue and run on read. No fused kernels
        (numpy has none); it exists to check the lazy machinery against the reference."""
        return Device(("fusion", ("flex",)))

    @staticmethod
    def cpu(fusion: bool | None = None) -> Device:
        """Cube kernels compiled to C and run on this machine's cores."""
        return Device(("cube", "cpu", (), _fusion_default(fusion)))

    @staticmethod
    def cuda(index: int = 0, fusion: bool | None = None) -> Device:
        """As ``torch.device("cuda", index)``: CUDA C kernels on GPU ``index`` (fused unless ``fusion=False``)."""
        return Device(("cube", "cuda", (int(index),), _fusion_default(fusion)))

    @staticmethod
    def wgpu(
        kind: DeviceKind | None = None, fusion: bool | None = None, require: tuple[str, ...] = ()
    ) -> Device:
        """WGSL kernels on a wgpu adapter; graphics API Auto (Linux: Vulkan, then OpenGL).
        ``require=("f16",)`` / ``("subgroups",)``: fail instead of falling back to plain WGSL."""
        return Device(("cube", "wgpu", _wgpu_args(kind, "Auto", require), _fusion_default(fusion)))

    @staticmethod
    def vulkan(
        kind: DeviceKind | None = None, fusion: bool | None = None, require: tuple[str, ...] = ()
    ) -> Device:
        """``Device.wgpu`` on the Vulkan graphics API."""
        return Device(("cube", "wgpu", _wgpu_args(kind, "Vulkan", require), _fusion_default(fusion)))

    @staticmethod
    def opengl(
        kind: DeviceKind | None = None, fusion: bool | None = None, require: tuple[str, ...] = ()
    ) -> Device:
        """``Device.wgpu`` on the OpenGL graphics API."""
        return Device(("cube", "wgpu", _wgpu_args(kind, "Gl", require), _fusion_default(fusion)))

    @staticmethod
    def wgpu_options() -> WgpuOptions:
        """A builder: ``Device.wgpu_options().device_kind(k).graphics_api("Vulkan").init()``
        selects the adapter now and raises DeviceUnavailableError instead of deferring it."""
        return WgpuOptions()

    @staticmethod
    def default() -> Device:
        """``EMBER_DEVICE`` (e.g. ``flex``, ``cpu+autodiff``, ``cuda:0``) if set, else Flex with
        Autodiff (``dispatch<autodiff<flex>>``).

        The default records gradients, as PyTorch's does: ``ember.ones(3, requires_grad=True)``
        and an ``nn.Module`` built without a device train out of the box. Untracked ops pass
        through the Autodiff layer without recording anything. Flex is the default backend
        because on small tensors numpy's per-op cost beats a kernel launch."""
        env = os.environ.get("EMBER_DEVICE")
        if env:
            return Device.parse(env)
        return Device.flex().autodiff()

    @staticmethod
    def parse(text: str) -> Device:
        """``flex``, ``cpu``, ``cuda``, ``cuda:1``, ``wgpu``, ``vulkan``, ``opengl``; ``+autodiff``
        suffix. ``wgpu:cpu`` / ``vulkan:discrete_gpu`` name a DeviceKind (``wgpu:IntegratedGpu(1)``)."""
        t = text.strip().lower()
        auto = t.endswith("+autodiff")
        if auto:
            t = t[: -len("+autodiff")]
        name, _, idx = t.partition(":")
        if name == "flex":
            d = Device.flex()
        elif name == "cpu":
            d = Device.cpu()
        elif name == "cuda":
            d = Device.cuda(int(idx or 0))
        elif name in ("wgpu", "vulkan", "opengl"):
            kind = _parse_kind(text.strip().partition(":")[2].removesuffix("+autodiff")) if idx else None
            d = {"wgpu": Device.wgpu, "vulkan": Device.vulkan, "opengl": Device.opengl}[name](kind)
        else:
            raise ValueError(f"unknown device {text!r}; expected flex, cpu, cuda[:i], wgpu, vulkan or opengl")
        return d.autodiff() if auto else d

    # ------------------------------------------------------------------ decorators
    def autodiff(self, checkpointing: str = "none") -> Device:
        """This device with gradients recorded (``checkpointing``: ``none`` keeps what
        backward needs; ``balanced`` recomputes memory-bound results in backward)."""
        if checkpointing not in _CHECKPOINTING:
            raise ValueError(f"checkpointing must be one of {list(_CHECKPOINTING)}, got {checkpointing!r}")
        if self.spec[0] == "autodiff":
            return Device(("autodiff", self.spec[1], checkpointing))
        return Device(("autodiff", self.spec, checkpointing))

    @property
    def is_autodiff(self) -> bool:
        """Whether the device records gradients (``.autodiff()``)."""
        return self.spec[0] == "autodiff"

    def inner(self) -> Device:
        """The device without autodiff."""
        return Device(self.spec[1]) if self.is_autodiff else self

    @property
    def type(self) -> str:
        """As ``torch.device.type``: ``"flex"``, ``"cpu"``, ``"cuda"`` or ``"wgpu"``."""
        s = self.spec[1] if self.is_autodiff else self.spec
        return s[0] if s[0] == "flex" else s[1]

    # ------------------------------------------------------------------ runtime
    def init(self) -> Device:
        """Build the backend stack now; raises ``DeviceUnavailableError`` on failure."""
        self.backend()
        return self

    def backend(self) -> Any:
        """The Dispatch backend of this device (built on first use)."""
        st = self._stack
        if st is None:
            from .backends import dispatch

            st = self._stack = dispatch.stack(self)
        return st

    def sync(self) -> None:
        """Wait for every queued op of this device."""
        self.backend().sync()

    # ------------------------------------------------------------------ value protocol
    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is Device and self.spec == other.spec)  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Device<{_describe(self.spec)}>"

    def __reduce__(self) -> Any:
        return (Device, (self.spec,))


_WGPU_APIS = ("Auto", "Vulkan", "Gl")
_WGPU_CAPS = ("f16", "subgroups")


def _wgpu_args(kind: DeviceKind | None, api: str, require: tuple[str, ...]) -> tuple[Any, ...]:
    bad = [r for r in require if r not in _WGPU_CAPS]
    if bad:
        raise ValueError(f"require= takes capabilities among {_WGPU_CAPS}, got {bad}")
    kind = kind or DeviceKind.default()
    req = tuple(sorted(set(require)))
    return (kind, api, req) if req else (kind, api)


class WgpuOptions:
    """Builder of a wgpu device (``Device.wgpu_options()``); ``init()`` builds it eagerly."""

    __slots__ = ("_kind", "_api", "_require", "_fusion")

    def __init__(self) -> None:
        self._kind: DeviceKind | None = None
        self._api = "Auto"
        self._require: tuple[str, ...] = ()
        self._fusion: bool | None = None

    def device_kind(self, kind: DeviceKind) -> WgpuOptions:
        """The adapter to use."""
        self._kind = kind
        return self

    def graphics_api(self, api: str) -> WgpuOptions:
        """``Auto``, ``Vulkan`` or ``Gl`` (``OpenGL`` is accepted for ``Gl``)."""
        api = {"opengl": "Gl", "gl": "Gl", "vulkan": "Vulkan", "auto": "Auto"}.get(str(api).lower(), api)
        if api not in _WGPU_APIS:
            raise ValueError(f"graphics_api must be one of {_WGPU_APIS}, got {api!r}")
        self._api = api
        return self

    def require(self, *caps: str) -> WgpuOptions:
        """Capabilities (``"f16"``, ``"subgroups"``) the adapter must have."""
        self._require = tuple(caps)
        return self

    def fusion(self, on: bool) -> WgpuOptions:
        """Whether the device fuses ops (the Fusion layer)."""
        self._fusion = on
        return self

    def setup(self, gpu_device: Any, adapter: Any = None) -> WgpuOptions:
        """Use a wgpu ``GPUDevice`` created elsewhere (``DeviceKind.existing(id)``)."""
        from .cube.runtime.wgpu_adapters import register_existing

        self._kind = DeviceKind.existing(register_existing(gpu_device, adapter))
        return self

    def device(self) -> Device:
        """The device these options describe (lazy, like ``Device.wgpu``)."""
        return Device(("cube", "wgpu", _wgpu_args(self._kind, self._api, self._require), _fusion_default(self._fusion)))

    def init(self) -> Device:
        """The device, initialised now: raises DeviceUnavailableError on failure."""
        return self.device().init()


def _parse_kind(text: str) -> DeviceKind:
    """``cpu``, ``discrete_gpu``, ``IntegratedGpu(1)``, ``default`` -> DeviceKind."""
    t = text.strip().replace("_", "")
    return parse_kind({"default": "DefaultDevice", "discretegpu": "DiscreteGpu"}.get(t.lower(), t))


def _fusion_default(fusion: bool | None) -> bool:
    if fusion is not None:
        return bool(fusion)
    v = os.environ.get("EMBER_FUSION")
    if v is not None:
        return v.strip().lower() not in ("0", "false", "off", "no")
    return True


def _describe(spec: tuple[Any, ...]) -> str:
    kind = spec[0]
    if kind == "flex":
        return "Flex(Cpu)"
    if kind == "fusion":
        return f"Fusion({_describe(spec[1])})"
    if kind == "autodiff":
        return f"Autodiff {{ device: {_describe(spec[1])}, checkpointing: {_CHECKPOINTING[spec[2]]} }}"
    runtime, args = spec[1], spec[2]
    if runtime == "cpu":
        return "Cube(Cpu)"
    if runtime == "cuda":
        return f"Cube(Cuda({args[0]}))"
    if runtime == "wgpu":
        req = f", require: {list(args[2])}" if len(args) > 2 else ""
        return f"Cube(Wgpu(WgpuDevice {{ kind: {args[0]!r}, backend: {args[1]}{req} }}))"
    return f"Cube({runtime})"


