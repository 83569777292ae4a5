"""Every public function, class, method and property of ember's API has a docstring (issue 18).

The walk covers ``ember.*`` (``ember.__all__``), every public attribute of ``ember.Tensor`` and
the public names of the API modules below, with the public methods and properties of their
classes. A method that overrides a documented one inherits its docstring (``inspect.getdoc``,
as ``help()`` and the API reference show it); a class needs its own. A docstring that only
points elsewhere ("Same as ``Tensor.x``") counts as missing.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

import ember

#: the modules of the public API whose public names (``__all__``, else the names they define) are walked
MODULES = (
    "ember", "ember.creation", "ember.functional", "ember.composite", "ember.random", "ember.dlpack",
    "ember.device", "ember.dtype", "ember.errors", "ember.serialization", "ember.tracing",
    "ember.nn", "ember.nn.functional", "ember.nn.init", "ember.nn.utils", "ember.optim",
    "ember.optim.lr_scheduler", "ember.utils.data", "ember.amp",
)


def _public_names(mod: Any) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n, v in vars(mod).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == mod.__name__]
    return list(names)


def _missing(doc: str | None) -> bool:
    return not doc or not doc.strip() or doc.strip().startswith("Same as")


def _walk() -> tuple[list[str], int]:
    """(names without a docstring, number of objects checked)."""
    bad: list[str] = []
    seen: set[int] = set()
    count = 0

    def check(qual: str, obj: Any, own: bool = False) -> None:
        nonlocal count
        count += 1
        doc = obj.__doc__ if own else inspect.getdoc(obj)
        if _missing(doc):
            bad.append(qual)

    def members(qual: str, cls: type) -> None:
        for name, value in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(value):
                check(f"{qual}.{name}", getattr(cls, name) if not isinstance(value, property) else value)

    for modname in MODULES:
        mod = importlib.import_module(modname)
        for name in _public_names(mod):
            obj = getattr(mod, name)
            if inspect.ismodule(obj) or isinstance(obj, ember.DType) or id(obj) in seen:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj) or callable(obj)):
                continue  # constants
            if not getattr(obj, "__module__", "").startswith("ember"):
                continue  # re-exported from another library
            seen.add(id(obj))
            if inspect.isclass(obj):
                check(f"{modname}.{name}", obj, own=True)
                members(f"{modname}.{name}", obj)
            else:
                check(f"{modname}.{name}", obj)
    members("Tensor", ember.Tensor)
    return bad, count


def test_every_public_object_has_a_docstring():
    bad, count = _walk()
    # the walk itself must reach the API: Tensor alone has a few hundred public names
    assert count > 900, f"the walk checked only {count} objects"
    assert not bad, f"{len(bad)} public objects without a docstring:\n" + "\n".join(bad)


def test_tensor_methods_have_docstrings_in_the_class_dict():
    """The method tables that ``ember.tensor`` copies onto Tensor keep their docstrings (and the
    generated ops get theirs from the factories)."""
    for name in ("add", "mul", "exp", "isnan", "sum", "reshape", "to", "gather", "add_", "acos", "new_zeros"):
        assert not _missing(getattr(ember.Tensor, name).__doc__), name
    assert ember.Tensor.mul.__qualname__ == "Tensor.mul"


def test_functions_take_the_method_docstring_and_signature():
    """``ember.<op>`` wrappers of Tensor methods show the method's docstring and its signature
    with ``input`` first, as torch's functions."""
    assert ember.sum.__doc__ == ember.Tensor.sum.__doc__
    params = list(inspect.signature(ember.sum).parameters)
    assert params[:2] == ["input", "dim"]


@pytest.mark.parametrize("bad_doc", [None, "", "  ", "Same as ``Tensor.add``."])
def test_a_missing_or_pointer_docstring_is_reported(bad_doc):
    assert _missing(bad_doc)
    assert not _missing("As ``torch.add``.")
