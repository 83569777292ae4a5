"""Autotune keys and identities: tuning levels, dimension anchors, device and probe ids.

A key is a tuple of ints and strings built from the problem (called on every op, so it is
cheap: no allocation beyond the tuple). Dimensions are *anchored*: rounded up to a power of
the level's base, so nearby shapes share one decision (1000 and 1024 both tune as 1024 at
``balanced``). The persisted form of a key is ``name=value`` pairs joined by commas.

Identities (see ``device_id``): decisions are stored per *physical* device and runtime
compiler, never per spelling of the device, so two spellings of one adapter share them (the
seed's stack stores per device index and tunes the same GPU twice).
"""

from __future__ import annotations

import math
import platform
import re
from typing import Any

__all__ = ["Level", "level", "LEVELS", "anchor", "device_id", "throughput_id", "layout_class", "problem_class"]


class Level:
    """How hard the tuner tries.

    ``base``: dimensions anchor to powers of it (None: exact dimensions); ``threshold``: a
    candidate reaching this fraction of its roofline bound ends the search (None: never);
    ``samples``: timed samples per surviving candidate; ``eliminate``: a candidate whose fastest
    sample is slower than this factor times the best median is dropped; ``budget_s``: soft limit
    on the sampling rounds of one key (warm-ups, compiles and first samples do not count).

    A plain slotted class, not a dataclass: this module loads with every device start."""

    __slots__ = ("name", "base", "threshold", "samples", "eliminate", "budget_s")

    def __init__(
        self, name: str, base: float | None, threshold: float | None, samples: int, eliminate: float, budget_s: float
    ) -> None:
        self.name = name
        self.base = base
        self.threshold = threshold
        self.samples = samples
        self.eliminate = eliminate
        self.budget_s = budget_s

    def __repr__(self) -> str:
        return f"Level({self.name!r})"

    def anchor(self, x: int) -> int:
        return anchor(x, self.base)


LEVELS: dict[str, Level] = {
    "minimal": Level("minimal", 4.0, 0.6, 3, 1.15, 0.5),
    "balanced": Level("balanced", 2.0, 0.8, 5, 1.3, 2.0),
    "extensive": Level("extensive", math.sqrt(2.0), 0.95, 10, 1.6, 10.0),
    "full": Level("full", None, None, 20, math.inf, math.inf),
}

_level_cache: tuple[int, Level] | None = None


def level() -> Level:
    """The configured level (``autotune.level`` / ``EMBER_AUTOTUNE_LEVEL``), cached per config generation."""
    global _level_cache
    from ..environment import config

    gen = config.generation()
    c = _level_cache
    if c is not None and c[0] == gen:
        return c[1]
    lvl = LEVELS[config.get("autotune.level")]
    _level_cache = (gen, lvl)
    return lvl


def anchor(x: int, base: float | None) -> int:
    """``x`` rounded up to the next power of ``base`` (0 and 1 stay; None: ``x`` itself)."""
    if base is None or x <= 1:
        return x
    if base == 2.0:  # the default level: integer arithmetic
        return 1 << (x - 1).bit_length()
    if base == 4.0:
        b = (x - 1).bit_length()
        return 1 << (b + (b & 1))
    p = base ** math.ceil(math.log(x, base) - 1e-9)
    return max(x, int(math.ceil(p - 1e-6)))


def layout_class(shape: tuple[int, ...], strides: tuple[int, ...]) -> str:
    """Layout of a 2-d operand (last two dims): ``row`` (row-major), ``col`` (transposed
    view), ``strided`` (anything else); size-1 dims do not count."""
    r, c = shape[-2:]
    sr, sc = strides[-2:]
    if c == 1 or sc == 1:
        if r == 1 or sr >= c:
            return "row"
    if r == 1 or sr == 1:
        if c == 1 or sc >= r:
            return "col"
    return "strided"


def problem_class(m: int, n: int, k: int) -> str:
    """Shape class of a product: ``inner`` (1 x k x 1), ``matvec`` (n == 1), ``vecmat``
    (m == 1), else ``general``."""
    if m == 1 and n == 1:
        return "inner"
    if n == 1:
        return "matvec"
    if m == 1:
        return "vecmat"
    return "general"


# ------------------------------------------------------------------------------- identities

_SAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def _clean(text: str) -> str:
    return _SAFE.sub("_", text.strip()).strip("_") or "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1]
    except OSError:
        pass
    return platform.processor() or platform.machine()


def compiler_identity(version_text: str) -> str:
    """``cc --version`` output -> ``gcc-12.2`` / ``clang-17.0`` (family and major.minor)."""
    first = version_text.strip().splitlines()[0] if version_text.strip() else ""
    nums = re.findall(r"(\d+)\.(\d+)(?:\.\d+)?", first)
    ver = f"{nums[-1][0]}.{nums[-1][1]}" if nums else "?"
    low = version_text.lower()
    fam = "clang" if "clang" in low else ("gcc" if ("gcc" in low or "free software foundation" in low) else "cc")
    return f"{fam}-{ver}"


def _cpu_device_id(client: Any) -> str:
    from ..environment import config

    comp = compiler_identity(client.server.toolchain.version)
    user_flags = config.get("cpu.cflags")
    if user_flags != config._spec("cpu.cflags").default:  # other flags change the code (vector width, ...)
        import hashlib

        comp += "+" + hashlib.sha256(str(user_flags).encode()).hexdigest()[:6]
    return f"cpu-{_clean(_cpu_model())}/{client.name}<c:{comp}>"


def device_id(client: Any) -> str:
    """The physical device and the runtime<compiler> a client runs on: ``client.device_id``
    where the runtime defines it, else derived (cpu: ``cpu-<model>/cpu<c:gcc-12.2>``; other
    runtimes without an id: ``<runtime>-<index>/<client name>``, which does depend on the
    spelling -- runtimes should define ``device_id``)."""
    own = getattr(client, "device_id", None)
    if own:
        return str(own)
    if getattr(client, "runtime", None) == "cpu":
        return _cpu_device_id(client)
    return f"{getattr(client, 'runtime', 'device')}-{getattr(client, 'index', 0)}/{getattr(client, 'name', '?')}"


def _total_memory() -> int:
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def throughput_id(client: Any) -> str:
    """``<runtime>-<adapter>-<memory>``: names the probe results. ``client.throughput_id`` where
    the runtime defines it; cpu: ``cpu-<model>-<cores usable>c-mem<GiB>G`` (the probes measure
    what the cores this process may use deliver)."""
    own = getattr(client, "throughput_id", None)
    if own:
        return str(own)
    if getattr(client, "runtime", None) == "cpu":
        import os

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return f"cpu-{_clean(_cpu_model())}-{cores}c-mem{round(_total_memory() / 2**30)}G"
    return _clean(device_id(client))
