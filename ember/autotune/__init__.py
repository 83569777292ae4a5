"""``ember.autotune``: pick the fastest kernel variant per device and problem, and remember it.

A backend describes an op as a ``TunableSet`` of ``Tunable`` candidates and calls
``execute(client, tset, *args)`` where it would launch a kernel (see ``tuner.py``). Keys anchor
dimensions to buckets (``keys.py``); throughput probes give roofline bounds (``probes.py``);
decisions persist in the store (``decisions.py``) per *physical* device: runtimes name it with
``client.device_id`` and time candidates with ``client.profile``.

Importing this package is cheap (the probes' kernel is expanded only when a probe runs).
"""

from __future__ import annotations

from .keys import LEVELS, Level, anchor, device_id, level, throughput_id
from .tuner import (
    AutotuneCheckWarning,
    AutotuneError,
    Tunable,
    TunableSet,
    choose,
    device_lock,
    execute,
    forget,
    no_tuning,
)

__all__ = [
    "AutotuneCheckWarning",
    "AutotuneError",
    "LEVELS",
    "Level",
    "Tunable",
    "TunableSet",
    "anchor",
    "choose",
    "device_id",
    "device_lock",
    "execute",
    "forget",
    "level",
    "no_tuning",
    "throughput_id",
]
