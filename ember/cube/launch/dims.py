"""The shape of a launch: units per cube (``CubeDim``), cubes per launch (``CubeCount``), and
tensors passed in lines (``LineArg`` / ``lines``)."""

from __future__ import annotations

from typing import Any

__all__ = ["CubeCount", "CubeDim", "LineArg", "lines"]


class CubeDim:
    """Units per cube (a GPU's block size): ``CubeDim(256)``, ``CubeDim(16, 16)``."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int = 1, y: int = 1, z: int = 1) -> None:
        if min(x, y, z) < 1:
            raise ValueError(f"CubeDim sizes must be >= 1, got ({x}, {y}, {z})")
        self.x, self.y, self.z = int(x), int(y), int(z)

    @property
    def units(self) -> int:
        return self.x * self.y * self.z

    def __eq__(self, o: object) -> bool:
        return isinstance(o, CubeDim) and (o.x, o.y, o.z) == (self.x, self.y, self.z)

    def __hash__(self) -> int:
        return hash((self.x, self.y, self.z))

    def __repr__(self) -> str:
        return f"CubeDim({self.x}, {self.y}, {self.z})"


class CubeCount:
    """Cubes per launch (a GPU's grid): ``CubeCount(8)``, ``CubeCount.covering(n, dim)``."""

    __slots__ = ("x", "y", "z")

    def __init__(self, x: int = 1, y: int = 1, z: int = 1) -> None:
        if min(x, y, z) < 0:
            raise ValueError(f"CubeCount sizes must be >= 0, got ({x}, {y}, {z})")
        self.x, self.y, self.z = int(x), int(y), int(z)

    @staticmethod
    def covering(units: int, dim: CubeDim | int, max_x: int = 65535) -> CubeCount:
        """Enough cubes for ``units`` units (x first, spilling into y past ``max_x``, as GPUs
        limit the x extent); kernels bound-check ``ABSOLUTE_POS``. Past ``max_x`` the rows of
        the grid are evened out, so fewer than y cubes are surplus: a full last row of x = max_x
        cubes could add up to max_x - 1 idle cubes (half the grid for 2 * max_x + 1 cubes; on
        an H200 that cost a 256M-element fused chain 9% of its time)."""
        per = dim.units if isinstance(dim, CubeDim) else int(dim)
        n = max(-(-units // per), 1)
        if n <= max_x:
            return CubeCount(n)
        y = -(-n // max_x)
        return CubeCount(-(-n // y), y)

    @property
    def cubes(self) -> int:
        return self.x * self.y * self.z

    def __repr__(self) -> str:
        return f"CubeCount({self.x}, {self.y}, {self.z})"


class LineArg:
    """A tensor passed to a ``cube.Array[cube.Line[E]]`` parameter in lines of ``width``."""

    __slots__ = ("tensor", "width")

    def __init__(self, tensor: Any, width: int) -> None:
        if width not in (1, 2, 4, 8, 16):
            raise ValueError(f"line width must be 1, 2, 4, 8 or 16, got {width}")
        self.tensor = tensor
        self.width = width


def lines(tensor: Any, width: int) -> LineArg:
    """Pass ``tensor`` to a kernel as lines of ``width`` elements (its last dim must be
    contiguous and divisible by ``width``)."""
    return LineArg(tensor, width)
