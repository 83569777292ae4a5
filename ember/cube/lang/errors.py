"""Errors of the kernel language, pointing at the kernel's own source line."""

from __future__ import annotations

from ...errors import EmberError


class CubeSyntaxError(EmberError, SyntaxError):
    """A ``@cube`` function uses Python the kernel language does not have (or mixes types).

    ``str(e)`` reads ``file:line: what`` followed by a ``hint:`` saying what to write instead;
    ``filename``, ``lineno`` and ``text`` are set as for a Python ``SyntaxError``, so the
    traceback shows the kernel line itself.
    """

    def __init__(
        self,
        what: str,
        filename: str = "<kernel>",
        lineno: int = 0,
        text: str = "",
        hint: str = "",
        col: int = 0,
    ) -> None:
        self.what = what
        self.hint = hint
        msg = f"{filename}:{lineno}: {what}"
        if hint:
            msg += f"\nhint: {hint}"
        super().__init__(msg, (filename, lineno, col + 1 if text else None, text))

    def __str__(self) -> str:  # SyntaxError's own __str__ appends "(file, line N)" again
        return self.msg
