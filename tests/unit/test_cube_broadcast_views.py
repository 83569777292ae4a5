"""Zero-stride (expanded) operands at the backend level, on the Cube devices of
``tests/devices.py`` (the C runtime eager and fused, lavapipe where installed).

The Tensor API expands a tensor only after a reshape to the target's rank, so a backend
``expand`` to a longer shape (new leading dims, numpy's rule, as Flex's ``np.broadcast_to``)
is reached only from backend code (gradient rules, composites, attention's causal mask): the
Cube backend's ``expand`` once zipped the dims from the left there and gave ``masked_fill`` a
view whose strides missed the leading dims. Every case is compared with numpy on fresh random
values, mask and data both random, so a misread mask shows up.
"""

from __future__ import annotations

import numpy as np
import pytest
from devices import device_cases

from ember import dtype as dt

CUBE = [pytest.param(c.device, id=c.name, marks=[pytest.mark.skip(reason=f"{c.name}: {c.unavailable}")]
                     if c.unavailable else [])
        for c in device_cases() if not c.is_autodiff and c.device.inner().type != "flex"]

#: (data shape, mask shape): new leading dims, size-1 dims, both, and sizes on the lines/rows
#: paths (4096 elements and more) as well as the strided one
CASES = [
    ((2, 4, 16, 16), (16, 16)),
    ((2, 3, 4), (3, 4)),
    ((8, 8), (8,)),
    ((3, 5), ()),
    ((2, 3, 4), (2, 1, 4)),
    ((2, 2, 3, 5), (1, 2, 1, 5)),
    ((4, 5), (4, 1)),
    ((3, 4096), (4096,)),
    ((2, 3, 700), (3, 1)),
    ((2, 64, 64), (1, 64, 64)),
]


@pytest.mark.parametrize("cube_dev", CUBE)
@pytest.mark.parametrize("shape,mshape", CASES)
def test_masked_fill_with_an_expanded_mask(cube_dev, shape, mshape):
    bk = cube_dev.backend()
    rng = np.random.default_rng(abs(hash((shape, mshape))) % 2**32)
    x = rng.standard_normal(shape).astype(np.float32)
    m = rng.random(mshape) < 0.5
    mask = bk.expand(bk.from_data(m, dt.bool_), shape)  # zero strides on the broadcast dims
    got = np.asarray(bk.into_data(bk.masked_fill(bk.from_data(x, dt.float32), mask, -7.5)))
    np.testing.assert_array_equal(got, np.where(np.broadcast_to(m, shape), np.float32(-7.5), x))


@pytest.mark.parametrize("cube_dev", CUBE)
@pytest.mark.parametrize("shape,mshape", CASES[:6])
def test_expanded_operands_of_where_and_add(cube_dev, shape, mshape):
    """The same views through the other elementwise families (ternary ``where``, binary
    ``add``): expand's strides, not one kernel, were at fault."""
    bk = cube_dev.backend()
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype(np.float32)
    y = rng.standard_normal(mshape).astype(np.float32)
    m = rng.random(mshape) < 0.5
    bx = bk.from_data(x, dt.float32)
    by = bk.expand(bk.from_data(y, dt.float32), shape)
    bm = bk.expand(bk.from_data(m, dt.bool_), shape)
    np.testing.assert_array_equal(np.asarray(bk.into_data(bk.where(bm, by, bx))),
                                  np.where(np.broadcast_to(m, shape), np.broadcast_to(y, shape), x))
    np.testing.assert_allclose(np.asarray(bk.into_data(bk.add(bx, by))), x + y, rtol=1e-6)
    assert np.asarray(bk.into_data(by)).tolist() == np.broadcast_to(y, shape).tolist()
