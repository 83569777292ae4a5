"""``@cube.kernel`` / ``@cube.function`` and the launch path, one module per idea:

* ``dims``   -- ``CubeDim`` (units per cube), ``CubeCount`` (cubes per launch), ``lines``;
* ``cube_kernel`` -- the kernel and function objects: bind arguments, KernelId / IR / source,
  find or build the launch plan;
* ``args``   -- argument resolution (buffer views, ArgSigs, scalar types, aliasing);
* ``plan``   -- the launch plan: info packing and the per-launch hot path into the server.
"""

from __future__ import annotations

from .cube_kernel import CubeFunction, CubeKernel, _client_of, function, kernel
from .dims import CubeCount, CubeDim, LineArg, lines

__all__ = ["CubeKernel", "CubeFunction", "CubeCount", "CubeDim", "LineArg", "lines", "kernel", "function", "_client_of"]
