"""The tuning progress bar: shown only when tuning takes longer than 0.5 s, only on an
interactive terminal (stderr is a TTY, ``CI`` and ``TERM=dumb`` unset), and only where ``rich``
is installed; never in pipes or CI logs. Without it the tuner's steps cost one clock read."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["Progress", "DELAY_S"]

#: tuning shorter than this never shows a bar
DELAY_S = 0.5


def interactive() -> bool:
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


class Progress:
    __slots__ = ("title", "total", "done", "t0", "_bar", "_task", "_enabled")

    def __init__(self, title: str, total: int) -> None:
        self.title = title
        self.total = total
        self.done = 0
        self.t0 = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None
        self._enabled = interactive()

    def step(self, what: str | None) -> None:
        """A candidate starts (``what``: its name) or a sampling round starts (None)."""
        if what is not None:
            self.done += 1
        if not self._enabled:
            return
        if self._bar is None:
            if time.perf_counter() - self.t0 < DELAY_S:
                return
            try:
                from rich.progress import Progress as RichProgress
            except ImportError:
                self._enabled = False
                return
            self._bar = RichProgress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=self.total)
        self._bar.update(self._task, completed=min(self.done, self.total), description=f"{self.title} {what or ''}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
