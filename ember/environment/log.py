"""The debug log: what ember compiles, tunes, times and fuses, through the standard ``logging`` module.

``EMBER_DEBUG_LOG=stdout|stderr|<file>`` (config key ``debug.log``) turns it on; the optional
``EMBER_DEBUG_LOG_CATEGORIES=compilation,autotune`` (``debug.log_categories``) keeps only some of
the categories. Categories and their loggers:

==============  ================  ===================================================
category        logger            what
==============  ================  ===================================================
compilation     ``ember.compile``  every kernel compiled or loaded: name, KernelId, source
autotune        ``ember.autotune`` every candidate's timing, the bounds, the winner
performance     ``ember.perf``     kernel timings
fusion          ``ember.fusion``   blocks and the fuser chosen
==============  ================  ===================================================

Instrumented code asks first, so a disabled log costs one cached lookup::

    if log.enabled("autotune"):
        log.logger("autotune").debug("candidate %s: median %.3g s", name, median)

Invariants:

* While the log is on, ember owns one handler on the enabled category loggers (level DEBUG,
  ``propagate = False``, so the records are not printed twice by an application's root handler);
  while it is off, ember leaves those loggers alone (an application may route them itself).
* ``configure()`` is idempotent and runs lazily: ``enabled``/``logger`` call it when the
  configuration generation changed (``config.reload()``), so the cost of ``enabled`` when nothing
  changed is an int comparison and a dict lookup.
* The first lines written to a destination are a header: the categories, then the warning that
  timings and autotune choices made while the log is on may be distorted (the seed's stack forces
  synchronisation for its log and so its autotune "short-circuits"), then every ``header_note``.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # logging loads with the first handler or logger: a start with the log off skips it (~2 ms)
    import logging

from . import config

__all__ = [
    "CATEGORIES",
    "DISTORTION_NOTE",
    "enabled",
    "logger",
    "configure",
    "header_note",
    "compile_block",
    "destination",
]

#: category -> logger name
CATEGORIES: dict[str, str] = {
    "compilation": "ember.compile",
    "autotune": "ember.autotune",
    "performance": "ember.perf",
    "fusion": "ember.fusion",
}
_ALIASES = {"compile": "compilation", "perf": "performance", "fuse": "fusion", "tune": "autotune"}

DISTORTION_NOTE = "ember debug log: kernel timings and autotune choices made while it is on may be distorted"

_lock = threading.RLock()
_generation = -1  # config generation the current state was built from
_on: dict[str, bool] = dict.fromkeys(CATEGORIES, False)
_handler: logging.Handler | None = None
_target: tuple[str, str | None] | None = None  # (destination, categories text) of _handler
_notes: list[str] = []  # header notes, in the order given


_classes: list[Any] = []


def _handler_classes() -> tuple[Any, Any]:
    """(_StdStream, _Formatter), defined at the first handler (they subclass logging's)."""
    if _classes:
        return _classes[0], _classes[1]
    import logging

    class _StdStream(logging.StreamHandler):  # type: ignore[type-arg]
        """Writes to whatever ``sys.stdout``/``sys.stderr`` is *now* (pytest and redirects swap them)."""

        def __init__(self, which: str) -> None:
            self._which = which
            super().__init__()

        @property  # type: ignore[override]
        def stream(self) -> TextIO:
            return getattr(sys, self._which)

        @stream.setter
        def stream(self, value: object) -> None:
            pass  # the stream is looked up at each write

    class _Formatter(logging.Formatter):
        """One-line records get a ``[logger]`` prefix; multi-line blocks (kernel sources) are written raw,
        so they can be copied out as they are."""

        def format(self, record: logging.LogRecord) -> str:
            msg = record.getMessage()
            if record.exc_info:
                msg += "\n" + self.formatException(record.exc_info)
            if "\n" in msg or record.name == "ember":
                return msg
            return f"[{record.name}] {msg}"

    _classes[:] = [_StdStream, _Formatter]
    return _StdStream, _Formatter


def _category(name: str) -> str:
    c = _ALIASES.get(name, name)
    if c not in CATEGORIES:
        raise ValueError(f"unknown debug log category {name!r}; categories: {', '.join(CATEGORIES)}")
    return c


def enabled(category: str) -> bool:
    """Whether the debug log records ``category`` (compilation | autotune | performance | fusion)."""
    if _generation != config.generation():
        configure()
    try:
        return _on[category]
    except KeyError:
        return _on[_category(category)]


def logger(category: str) -> logging.Logger:
    """The logger of a category (``ember.compile`` for ``compilation`` ...), configured."""
    if _generation != config.generation():
        configure()
    import logging

    return logging.getLogger(CATEGORIES[_category(category)])


def destination() -> str | None:
    """Where the log goes now (``stdout``, ``stderr``, a file path) or None when it is off."""
    configure()
    return _target[0] if _target is not None and _handler is not None else None


def configure() -> None:
    """Bring the handlers in line with the configuration (idempotent; called lazily)."""
    global _generation, _on
    with _lock:
        dest = config.get("debug.log")
        cats_text = config.get("debug.log_categories")
        gen = config.generation()
        want = (dest, cats_text) if dest is not None else None
        if want != _target:
            _teardown()
            if want is not None:
                _install(dest, cats_text)
        on = dict.fromkeys(CATEGORIES, False)
        if _handler is not None:
            import logging

            for c in CATEGORIES:
                on[c] = logging.getLogger(CATEGORIES[c]).handlers.count(_handler) > 0
        _on = on
        _generation = gen


def header_note(text: str) -> None:
    """Add a line to the log header, once per destination (written now if the header is out already)."""
    with _lock:
        if text in _notes:
            return
        _notes.append(text)
        if _handler is not None:
            _write_raw(text)


def compile_block(
    name: str, kernel_id: object, language: str, source: str, cached: bool, origin: str = ""
) -> None:
    """Log one kernel as the seed's ``[START_KERNEL_COMPILATION]`` block (category compilation).

    ``cached``: the artifact came from the store (``origin`` says which entry/file) and nothing was
    compiled; otherwise ``origin`` may name the compiler that ran."""
    if not enabled("compilation"):
        return
    lines = ["[START_KERNEL_COMPILATION]", f"name: {name}", f"id: {kernel_id}"]
    if cached:
        lines.append(f"loaded from store: {origin}")
    elif origin:
        lines.append(f"compiled by: {origin}")
    if source or not cached:
        lines += ["source:", f"```{language}", source.rstrip("\n"), "```"]
    lines.append("[END_KERNEL_COMPILATION]")
    import logging

    logging.getLogger(CATEGORIES["compilation"]).debug("\n".join(lines))


# --------------------------------------------------------------------------- machinery


def _install(dest: str, cats_text: str | None) -> None:
    global _handler, _target
    _target = (dest, cats_text)  # remembered even on failure, so a bad path warns once, not per call
    cats = list(CATEGORIES)
    if cats_text:
        cats = []
        for word in cats_text.split(","):
            word = word.strip()
            if not word:
                continue
            try:
                cats.append(_category(word))
            except ValueError as e:
                warnings.warn(f"debug.log_categories: {e} (ignored)", config.ConfigWarning, stacklevel=4)
    import logging

    std_stream, formatter = _handler_classes()
    handler: logging.Handler
    if dest in ("stdout", "stderr"):
        handler = std_stream(dest)
    else:
        try:
            os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
            handler = logging.FileHandler(dest, mode="a", encoding="utf-8")
        except OSError as e:
            warnings.warn(
                f"ember debug log: cannot open {dest} ({e.strerror or e}); the debug log is off",
                config.ConfigWarning,
                stacklevel=4,
            )
            return
    handler.setFormatter(formatter())
    handler.setLevel(logging.DEBUG)
    _handler = handler
    header = [
        f"ember debug log (pid {os.getpid()}): categories {', '.join(cats) or '(none)'}",
        DISTORTION_NOTE,
        *_notes,
    ]
    _write_raw("\n".join(header))
    for c in cats:
        lg = logging.getLogger(CATEGORIES[c])
        lg.addHandler(handler)
        lg.setLevel(logging.DEBUG)
        lg.propagate = False


def _teardown() -> None:
    global _handler, _target
    if _handler is not None:
        import logging

        for name in CATEGORIES.values():
            lg = logging.getLogger(name)
            if _handler in lg.handlers:
                lg.removeHandler(_handler)
                lg.setLevel(logging.NOTSET)
                lg.propagate = True
        _handler.close()  # closes a file; a _StdStream leaves sys.stdout/stderr open
    _handler = None
    _target = None


def _write_raw(text: str) -> None:
    assert _handler is not None
    import logging

    record = logging.LogRecord("ember", logging.INFO, __file__, 0, text, None, None)
    _handler.handle(record)
