"""The C compiler, rendered without running anything (the compile-only path): the phase model,
per-unit arrays, vector lines, the ABI, the info layout."""

from __future__ import annotations

import numpy as np

from ember import cube
from ember.cube.compiler.c import CCompiler

F32 = np.zeros(64, np.float32)


@cube.kernel
def simple(x: cube.Array[cube.f32], y: cube.Array[cube.f32], a: cube.f32):
    i = cube.ABSOLUTE_POS
    if i < y.len():
        y[i] = a * x[i] + y[i]


@cube.kernel
def two_phases(x: cube.Array[cube.f32], out: cube.Array[cube.f32]):
    sm = cube.SharedMemory(cube.f32, cube.CUBE_DIM)
    u = cube.UNIT_POS
    v = x[cube.ABSOLUTE_POS] * 2.0  # lives across the barrier
    local_only = v + 1.0  # used in the first region only
    sm[u] = local_only
    cube.sync_cube()
    out[cube.ABSOLUTE_POS] = v + sm[(u + 1) % cube.CUBE_DIM]


def unit_loops(src: str) -> int:
    return src.count("for (uint32_t u = 0; u < ")


def test_abi_and_a_single_unit_loop_without_barriers():
    src = simple.source(128, F32, F32.copy(), 2.0)
    entry = simple.kernel_id(128, F32, F32.copy(), 2.0).entry()
    assert f"void {entry}(void **buffers, const uint64_t *info, uint32_t cx, uint32_t cy, uint32_t cz)" in src
    assert unit_loops(src) == 1
    assert "#pragma omp parallel for schedule(static)" in src
    assert "const float s_a = em_slot_f32(info[0]);" in src  # scalars first, then metadata
    assert "const uint32_t m_y_len = (uint32_t)info[1];" in src
    assert "restrict" in src


def test_barriers_split_the_body_into_regions_and_only_crossing_values_become_per_unit():
    src = two_phases.source(64, F32, F32)
    assert unit_loops(src) == 2
    body = src[src.index("void two_phases") :]
    per_unit = [ln.strip() for ln in body.splitlines() if "_pu[64];" in ln]
    # v (a memory read) lives across the barrier: a per-unit array; u (a position) is
    # recomputed in the second region; local_only never leaves the first
    assert len(per_unit) == 1 and "_v_pu" in per_unit[0]
    second = body.split("sync_cube: region boundary")[1]
    assert "= u;" in second


def test_lines_become_vector_types_and_vector_memory_access():
    @cube.kernel
    def add(a: cube.Array[cube.Line[cube.f32]], b: cube.Array[cube.Line[cube.f32]]):
        i = cube.ABSOLUTE_POS
        if i < a.len():
            a[i] = a[i] + b[i]

    src = add.source(64, cube.lines(F32, 8), cube.lines(np.zeros(64, np.float32), 8))
    assert "typedef float em_f32x8 __attribute__((vector_size(32)));" in src
    assert "*(const em_f32x8u *)(b_b + (size_t)(" in src
    assert " + " in src.split("b_b + (size_t)")[1]  # the add itself is one vector expression


def test_info_layout_lists_only_what_the_body_reads():
    @cube.kernel
    def meta(t: cube.Tensor[cube.f32], n: cube.i64, k: cube.u32):
        if cube.ABSOLUTE_POS == 0:
            t[0] = cube.cast(t.shape(1) + t.stride(k), cube.f32) + cube.cast(n, cube.f32)

    k = meta.ir(32, np.zeros((2, 3, 4), np.float32), 5, 1)
    slots = CCompiler().compile(k).info
    assert [(s.kind, s.param, s.dim) for s in slots] == [
        ("scalar", 1, 0),
        ("scalar", 2, 0),
        ("shape", 0, 1),
        ("stride", 0, 0),
        ("stride", 0, 1),
        ("stride", 0, 2),
    ]  # shape(1) alone; stride(k) with a runtime k needs every stride, in order


def test_checked_compiler_guards_every_access():
    k = simple.ir(128, F32, F32, 2.0)
    src = CCompiler(checked=True).compile(k).source
    # each access is tested against its array's extent in its buffer (a view may start inside it)
    assert src.count("< (size_t)m_x_extent0)") == 1 and src.count("< (size_t)m_y_extent0)") == 2
