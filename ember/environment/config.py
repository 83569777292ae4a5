"""Configuration: one table of typed keys, read from files and the environment.

Sources, lowest priority first (a later source overrides an earlier one, key by key):

1. the defaults in ``_SPECS`` below;
2. ``[tool.ember]`` in the *nearest* ``pyproject.toml`` searched upward from the working directory
   (``[tool.ember.compilation] cache = false``);
3. the nearest ``ember.toml`` searched upward (top-level tables: ``[compilation] cache = false``);
4. environment variables ``EMBER_<SECTION>_<KEY>`` (``EMBER_COMPILATION_CACHE=0``,
   ``EMBER_AUTOTUNE_LEVEL=full``) and the short aliases ``EMBER_CACHE_DIR`` (= ``cache.root``) and
   ``EMBER_DEBUG_LOG`` (= ``debug.log``, which is also its regular name);
5. ``override({...})`` blocks (tests and tools), origin ``"override"``.

Invariants:

* Values are read once and cached; ``get`` is a dict lookup. ``reload()`` re-reads everything
  (tests change environment variables and the working directory) and bumps ``generation()``,
  which the store and the debug log compare against to notice a change cheaply.
* A bad source never breaks a program: unknown keys, values of the wrong type and unreadable
  files each produce one ``ConfigWarning`` per load naming the file (or variable) and key, and the
  key keeps its lower-priority value.
* Relative paths (``cache.root``, ``debug.log``) are made absolute when read: relative to the
  file's directory for a file, to the working directory for a variable. The words ``user`` /
  ``project`` (cache.root) and ``stdout`` / ``stderr`` (debug.log) are not paths.
* Keys marked ``trusted`` (``cpu.cc`` and ``cpu.cflags`` run a program or pass it flags;
  ``cache.root`` and ``debug.log`` move where ember writes and what it loads) are read from a
  file only when the file is owned by the current user (or root) and not writable by group or
  others (``trust.unsafe_reason``): an ``ember.toml`` planted in a shared directory above the
  working directory must not run a command for everyone working below it (as git's
  ``safe.directory``). Otherwise the key is ignored with one ``ConfigWarning`` naming the file,
  and ``ember config`` lists it (``ignored()``). Environment variables stay trusted: whoever sets
  them already runs code as the user.
"""

from __future__ import annotations

import os
import threading
import tomllib
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LEVELS",
    "ConfigWarning",
    "get",
    "effective",
    "reload",
    "generation",
    "files",
    "keys",
    "doc",
    "env_name",
    "override",
    "project_dir",
    "ignored",
    "parse_size",
]

#: autotune levels, from cheapest to most thorough
LEVELS: tuple[str, ...] = ("minimal", "balanced", "extensive", "full")


class ConfigWarning(UserWarning):
    """A configuration source had something ember could not use (it was ignored)."""


@dataclass(frozen=True, slots=True)
class _Spec:
    default: Any
    kind: str  # "bool" | "int" | "str" | "choice" | "path" | "size"
    doc: str
    optional: bool = False  # None is a valid value (meaning "unset")
    words: tuple[str, ...] = ()  # "choice": the allowed values; "path": words that are not paths
    minimum: int | None = None  # "int" only
    off_words: tuple[str, ...] = ("", "none")  # optional keys: env values that mean None
    #: runs a program, passes it flags or moves where ember writes: only from safe files
    trusted: bool = False


# The one table of keys. Everything else (env names, validation, `ember config`) derives from it.
_SPECS: dict[str, _Spec] = {
    "compilation.cache": _Spec(True, "bool", "persist compiled kernels in the cache store"),
    "cache.root": _Spec(
        "user", "path", "cache directory: user | project | a path", words=("user", "project"), trusted=True
    ),
    "cache.max_size": _Spec(
        5 << 30, "size", "largest size of the cache store (bytes, or 512M / 5G); least recently used go first",
        minimum=0,
    ),
    "debug.log": _Spec(
        None,
        "path",
        "debug log destination: stdout | stderr | a file path",
        optional=True,
        words=("stdout", "stderr"),
        off_words=("", "0", "none", "off", "false", "no"),
        trusted=True,
    ),
    "debug.log_categories": _Spec(
        None,
        "str",
        "comma-separated debug log categories (compilation,autotune,performance,fusion); unset = all",
        optional=True,
    ),
    "autotune.level": _Spec("balanced", "choice", "autotune effort", words=LEVELS),
    "autotune.disable_cache": _Spec(False, "bool", "ignore stored autotune decisions"),
    "autotune.checks": _Spec(False, "bool", "run every candidate and compare outputs"),
    "autotune.defer": _Spec(
        False, "bool", "a new key runs a quick candidate while its candidates compile in the background, then "
        "tunes (a faster first epoch; results then depend on when a key tuned, so runs are not bit-reproducible "
        "across processes)"
    ),
    "autotune.retune_provisional": _Spec(
        True, "bool", "a stored decision measured on a loaded machine (or with noisy samples) is tuned again "
        "by the next process that starts on a quiet machine (that process's results may then differ from the "
        "one that stored it)"
    ),
    "fusion.enabled": _Spec(True, "bool", "put the fusion decorator on JIT devices"),
    "fusion.queue_limit": _Spec(256, "int", "operations queued before a stream drains", minimum=1),
    "wgpu.default_device": _Spec(None, "str", "adapter used by Device.wgpu() default", optional=True),
    "cpu.cc": _Spec(None, "str", "C compiler of the cpu runtime (unset: $CC or cc)", optional=True, trusted=True),
    "cpu.cflags": _Spec(
        "-O3 -march=native -fopenmp -fPIC -shared", "str", "flags of the cpu runtime's C compiler", trusted=True
    ),
    "cpu.pool_limit": _Spec(
        1 << 30, "size", "host memory the cpu pool keeps for reuse after tensors die (bytes, or 256M / 1G)",
        minimum=0,
    ),
    "cpu.bundle": _Spec(
        True, "bool", "compile the kernels a new drain or tuned key needs several to one cc run (fewer, "
        "larger compiles: a faster cold start)"
    ),
    "cpu.channel": _Spec(
        "inline", "choice", "how the cpu runtime reaches its DSD stage: inline (measured faster) | thread",
        words=("inline", "thread"),
    ),
    "cube.checked": _Spec(False, "bool", "bounds-checked kernels (out-of-range reads give 0, writes drop)"),
    "cube.replay": _Spec(
        True, "bool", "repeated eager ops and fusion drains launch from a capture of their second run"
    ),
}

# Short aliases of regular names; listed after the regular names, so an alias wins when both are set.
_ALIASES: dict[str, str] = {"EMBER_CACHE_DIR": "cache.root"}

_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE = frozenset({"0", "false", "no", "off", "n", "f", ""})

_lock = threading.RLock()
_values: dict[str, Any] | None = None  # None until the first get(); replaced whole on reload
_origins: dict[str, str] = {}
_files: list[Path] = []
_ignored: list[tuple[Path, str, str]] = []  # (file, key, why) of trusted keys an unsafe file set
_generation = 0
_overrides: list[dict[str, Any]] = []  # stack of validated override() layers


def env_name(key: str) -> str:
    """The environment variable of ``key``: ``autotune.disable_cache`` -> ``EMBER_AUTOTUNE_DISABLE_CACHE``."""
    return "EMBER_" + key.replace(".", "_").upper()


def keys() -> list[str]:
    """All known keys, in table order."""
    return list(_SPECS)


def doc(key: str) -> str:
    """One line saying what ``key`` controls."""
    return _spec(key).doc


def get(key: str) -> Any:
    """The effective value of a dotted key (``get("autotune.level")``)."""
    values = _values
    if values is None:
        values = _load()
    try:
        return values[key]
    except KeyError:
        raise KeyError(f"unknown ember config key {key!r}; known keys: {', '.join(_SPECS)}") from None


def effective() -> list[tuple[str, Any, str]]:
    """``(key, value, origin)`` for every key, in table order.

    origin: ``default``, a config file path, ``env:NAME`` or ``override``."""
    get("cache.root")  # load outside the lock, so warnings are not raised while holding it
    with _lock:
        values = _values if _values is not None else _load()
        return [(k, values[k], _origins[k]) for k in _SPECS]


def files() -> list[Path]:
    """The configuration files that the current values were read from."""
    get("cache.root")  # make sure they were loaded
    return list(_files)


def ignored() -> list[tuple[Path, str, str]]:
    """``(file, key, reason)`` of every trusted key a config file set that was ignored because the
    file is not safe (another owner, or writable by group/others)."""
    get("cache.root")
    return list(_ignored)


def generation() -> int:
    """A number that changes every time the configuration is (re)loaded; 0 before the first load."""
    return _generation


def reload() -> None:
    """Re-read every source now (the environment, the working directory and the files may have changed)."""
    global _values
    with _lock:
        _values = None
    _load()  # outside the lock: see _load


@contextmanager
def override(values: Mapping[str, Any]) -> Iterator[None]:
    """Temporarily set keys above every other source (for tests and tools), e.g.
    ``with config.override({"cache.root": str(tmp), "autotune.level": "full"}): ...``.
    Strings are parsed as environment values are; other values are checked as TOML values are."""
    layer: dict[str, Any] = {}
    for key, raw in values.items():
        spec = _spec(key)
        if raw is None and spec.optional:
            layer[key] = None
        elif isinstance(raw, str):
            layer[key] = _from_text(key, spec, raw, Path.cwd())
        else:
            layer[key] = _from_toml(key, spec, raw, Path.cwd())
    with _lock:
        _overrides.append(layer)
    reload()
    try:
        yield
    finally:
        with _lock:
            _overrides.remove(layer)
        reload()


def project_dir() -> Path | None:
    """Directory of the *outermost* ``pyproject.toml`` above the working directory (cache.root = project)."""
    found = None
    for d in _search_dirs():
        if (d / "pyproject.toml").is_file():
            found = d
    return found


# --------------------------------------------------------------------------- loading


def _spec(key: str) -> _Spec:
    try:
        return _SPECS[key]
    except KeyError:
        raise KeyError(f"unknown ember config key {key!r}; known keys: {', '.join(_SPECS)}") from None


def _search_dirs() -> list[Path]:
    try:
        cwd = Path(os.getcwd())
    except OSError:  # the working directory was deleted: no files to find
        return []
    return [cwd, *cwd.parents]


def _nearest(name: str) -> Path | None:
    for d in _search_dirs():
        p = d / name
        if p.is_file():
            return p
    return None


def _load() -> dict[str, Any]:
    """Build the value table from every source. Warnings are emitted after the lock is released, so a
    ``-W error`` filter raises to the caller without leaving the module half-loaded."""
    global _values, _origins, _files, _generation, _ignored
    problems: list[str] = []
    refused: list[tuple[Path, str, str]] = []
    with _lock:
        if _values is not None:
            return _values
        values = {k: s.default for k, s in _SPECS.items()}
        origins = dict.fromkeys(_SPECS, "default")
        found: list[Path] = []

        pyproject = _nearest("pyproject.toml")
        if pyproject is not None:
            data = _read_toml(pyproject, problems)
            table = data.get("tool", {}).get("ember") if isinstance(data.get("tool"), dict) else None
            if table is not None:
                found.append(pyproject)
                if isinstance(table, dict):
                    _apply_table(table, pyproject, "tool.ember.", values, origins, problems, refused)
                else:
                    problems.append(f"{pyproject}: [tool.ember] must be a table")

        ember_toml = _nearest("ember.toml")
        if ember_toml is not None:
            found.append(ember_toml)
            _apply_table(_read_toml(ember_toml, problems), ember_toml, "", values, origins, problems, refused)

        dirs = _search_dirs()
        cwd = dirs[0] if dirs else Path("/")
        env_sources = [(env_name(k), k) for k in _SPECS] + list(_ALIASES.items())
        for name, key in env_sources:
            raw = os.environ.get(name)
            if raw is None:
                continue
            try:
                values[key] = _from_text(key, _SPECS[key], raw, cwd)
                origins[key] = f"env:{name}"
            except ValueError as e:
                problems.append(f"environment variable {name}={raw!r}: {e} (ignored)")

        for layer in _overrides:
            for key, value in layer.items():
                values[key] = value
                origins[key] = "override"

        # cpu.cc unset means "whatever the environment's C compiler is", as make and setuptools do.
        if values["cpu.cc"] is None:
            cc = os.environ.get("CC")
            values["cpu.cc"] = cc or "cc"
            if cc:
                origins["cpu.cc"] = "env:CC"

        _values, _origins, _files, _ignored = values, origins, found, refused
        _generation += 1
        by_file: dict[Path, list[str]] = {}
        for path, key, _why in refused:
            by_file.setdefault(path, []).append(key)
        for path, names in by_file.items():  # one warning per unsafe file
            why = next(w for p, _, w in refused if p == path)
            problems.append(
                f"{path}: ignored {', '.join(names)}: the file is {why}; settings that run a program or move "
                "the cache are read only from files owned by you (or root) and not writable by others"
            )
    for msg in problems:
        warnings.warn(msg, ConfigWarning, stacklevel=3)
    return values


def _read_toml(path: Path, problems: list[str]) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        problems.append(f"{path}: cannot read ember configuration ({e}); file ignored")
        return {}


def _apply_table(
    table: dict[str, Any],
    path: Path,
    prefix: str,
    values: dict[str, Any],
    origins: dict[str, str],
    problems: list[str],
    refused: list[tuple[Path, str, str]] | None = None,
) -> None:
    why_unsafe: list[str | None] = []  # the file's safety, checked at the first trusted key

    for section, sub in table.items():
        if not isinstance(sub, dict):
            problems.append(f"{path}: unknown ember config key '{prefix}{section}' (ignored)")
            continue
        for name, raw in sub.items():
            key = f"{section}.{name}"
            spec = _SPECS.get(key)
            if spec is None:
                problems.append(f"{path}: unknown ember config key '{prefix}{key}' (ignored)")
                continue
            if spec.trusted:
                if not why_unsafe:
                    why_unsafe.append(_file_unsafe(path))
                if why_unsafe[0] is not None:
                    if refused is not None:
                        refused.append((path, key, why_unsafe[0]))
                    continue
            try:
                values[key] = _from_toml(key, spec, raw, path.parent)
                origins[key] = str(path)
            except ValueError as e:
                problems.append(f"{path}: key '{prefix}{key}': {e} (ignored)")


def _file_unsafe(path: Path) -> str | None:
    """Why a config file may not set trusted keys (None: it may). The file itself is checked; its
    directory too, where others may write it without the sticky bit (they could replace the file)."""
    from . import trust

    try:
        why = trust.unsafe_reason(os.stat(path))
        if why is not None:
            return why
        dst = os.stat(path.parent)
        if dst.st_mode & 0o002 and not dst.st_mode & 0o1000 and trust.unsafe_reason(dst) is not None:
            return f"in {path.parent}, which others may write (mode {dst.st_mode & 0o7777:04o}, no sticky bit)"
    except OSError as e:
        return f"not checkable ({e.strerror or e})"
    return None


_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "tib": 1 << 40}


def parse_size(value: Any) -> int:
    """Bytes of a size setting: an int, or text such as ``512M``, ``5G``, ``1.5GiB`` (binary units)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"expected a size >= 0, got {value}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a size (bytes, or text such as 512M), got {value!r}")
    text = value.strip().lower().replace(" ", "")
    num = text.rstrip("kmgtib")
    unit = text[len(num):]
    if unit not in _SIZE_UNITS:
        raise ValueError(f"expected a size such as 512M or 5G, got {value!r}")
    try:
        n = float(num)
    except ValueError:
        raise ValueError(f"expected a size such as 512M or 5G, got {value!r}") from None
    if not n >= 0 or n == float("inf"):
        raise ValueError(f"expected a size >= 0, got {value!r}")
    return int(n * _SIZE_UNITS[unit])


def _resolve_path(spec: _Spec, text: str, base: Path) -> str:
    if text in spec.words:
        return text
    p = Path(text).expanduser()
    return str(p if p.is_absolute() else (base / p).resolve())


def _from_text(key: str, spec: _Spec, raw: str, base: Path) -> Any:
    """Parse an environment variable's text into the key's type; raise ValueError when it can't."""
    text = raw.strip()
    if spec.optional and text.lower() in spec.off_words:
        return None
    if spec.kind == "bool":
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError("expected a boolean (1/0, true/false, yes/no, on/off)")
    if spec.kind == "int":
        try:
            n = int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
        return _check_int(spec, n)
    if spec.kind == "choice":
        low = text.lower()
        if low not in spec.words:
            raise ValueError(f"expected one of {', '.join(spec.words)}")
        return low
    if spec.kind == "path":
        if not text:
            raise ValueError("expected a path")
        return _resolve_path(spec, text, base)
    if spec.kind == "size":
        return parse_size(text)
    return raw


def _from_toml(key: str, spec: _Spec, raw: Any, base: Path) -> Any:
    """Check a TOML value (already typed) against the key; raise ValueError when it doesn't fit."""
    if spec.kind == "bool":
        if not isinstance(raw, bool):
            raise ValueError(f"expected true or false, got {raw!r}")
        return raw
    if spec.kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(f"expected an integer, got {raw!r}")
        return _check_int(spec, raw)
    if spec.kind == "choice":
        if not isinstance(raw, str) or raw.lower() not in spec.words:
            raise ValueError(f"expected one of {', '.join(spec.words)}, got {raw!r}")
        return raw.lower()
    if spec.kind == "path":
        if not isinstance(raw, str):
            raise ValueError(f"expected a string, got {raw!r}")
        if spec.optional and raw.strip() == "":
            return None
        return _resolve_path(spec, raw.strip(), base)
    if spec.kind == "size":
        return parse_size(raw)
    # "str": lists of strings are joined (debug.log_categories = ["compilation", "autotune"])
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        return ",".join(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)  # e.g. wgpu.default_device = 1
    if not isinstance(raw, str):
        raise ValueError(f"expected a string, got {raw!r}")
    if spec.optional and raw.strip() == "":
        return None
    return raw


def _check_int(spec: _Spec, n: int) -> int:
    if spec.minimum is not None and n < spec.minimum:
        raise ValueError(f"expected an integer >= {spec.minimum}, got {n}")
    return n
