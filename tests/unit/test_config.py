"""ember.environment.config: sources, priorities, parsing, warnings, `ember config`."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from ember.environment import commands, config
from ember.environment.config import ConfigWarning


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    """A working directory with no config files above it and no EMBER_* / CC variables; the
    process configuration is re-read after the test so later tests see the real environment."""
    for name in list(os.environ):
        if name.startswith("EMBER_") or name == "CC":
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config.reload()
    yield work
    monkeypatch.undo()
    config.reload()


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def origins() -> dict[str, str]:
    return {k: o for k, _, o in config.effective()}


def test_defaults():
    assert config.get("compilation.cache") is True
    assert config.get("cache.root") == "user"
    assert config.get("debug.log") is None
    assert config.get("autotune.level") == "balanced"
    assert config.get("autotune.disable_cache") is False
    assert config.get("autotune.checks") is False
    assert config.get("fusion.enabled") is True
    assert config.get("fusion.queue_limit") == 256
    assert config.get("wgpu.default_device") is None
    assert config.get("cpu.cc") == "cc"
    assert config.get("cpu.cflags") == "-O3 -march=native -fopenmp -fPIC -shared"
    assert set(origins().values()) == {"default"}
    assert config.files() == []


def test_unknown_key_raises():
    with pytest.raises(KeyError, match="autotune.levle"):
        config.get("autotune.levle")


def test_cc_from_environment(monkeypatch):
    monkeypatch.setenv("CC", "clang-17")
    config.reload()
    assert config.get("cpu.cc") == "clang-17"
    assert origins()["cpu.cc"] == "env:CC"
    monkeypatch.setenv("EMBER_CPU_CC", "gcc-13")  # the ember variable beats $CC
    config.reload()
    assert config.get("cpu.cc") == "gcc-13"
    assert origins()["cpu.cc"] == "env:EMBER_CPU_CC"


def test_priority_pyproject_then_ember_toml_then_env(clean_env, monkeypatch):
    root = clean_env
    pyproject = write(
        root / "pyproject.toml",
        "[project]\nname = 'x'\n"
        "[tool.ember.autotune]\nlevel = 'minimal'\nchecks = true\n"
        "[tool.ember.fusion]\nqueue_limit = 64\n",
    )
    ember_toml = write(root / "ember.toml", "[autotune]\nlevel = 'extensive'\n[compilation]\ncache = false\n")
    config.reload()
    assert config.get("autotune.level") == "extensive"  # ember.toml beats pyproject
    assert config.get("autotune.checks") is True  # only in pyproject
    assert config.get("fusion.queue_limit") == 64
    assert config.get("compilation.cache") is False
    o = origins()
    assert o["autotune.level"] == str(ember_toml)
    assert o["autotune.checks"] == str(pyproject)
    assert o["fusion.enabled"] == "default"
    assert config.files() == [pyproject, ember_toml]

    monkeypatch.setenv("EMBER_AUTOTUNE_LEVEL", "FULL")  # env beats both, case-insensitive choice
    monkeypatch.setenv("EMBER_COMPILATION_CACHE", "1")
    config.reload()
    assert config.get("autotune.level") == "full"
    assert config.get("compilation.cache") is True
    assert origins()["autotune.level"] == "env:EMBER_AUTOTUNE_LEVEL"


def test_files_found_upward_and_nearest_pyproject_wins(clean_env):
    outer = clean_env
    write(outer / "pyproject.toml", "[tool.ember.fusion]\nqueue_limit = 7\n")
    inner = outer / "pkg"
    write(inner / "pyproject.toml", "[tool.ember.fusion]\nenabled = false\n")
    deep = inner / "src" / "deeper"
    deep.mkdir(parents=True)
    os.chdir(deep)
    config.reload()
    assert config.get("fusion.enabled") is False  # nearest pyproject.toml
    assert config.get("fusion.queue_limit") == 256  # the outer one is not read
    write(outer / "ember.toml", "[fusion]\nqueue_limit = 9\n")  # ember.toml further up is found
    config.reload()
    assert config.get("fusion.queue_limit") == 9
    assert config.project_dir() == outer  # outermost pyproject.toml (cache.root = project)


def test_env_parsing_booleans_and_ints(monkeypatch):
    for text, want in [
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("1", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
    ]:
        monkeypatch.setenv("EMBER_AUTOTUNE_DISABLE_CACHE", text)
        config.reload()
        assert config.get("autotune.disable_cache") is want, text
    monkeypatch.setenv("EMBER_FUSION_QUEUE_LIMIT", " 32 ")
    config.reload()
    assert config.get("fusion.queue_limit") == 32


@pytest.mark.parametrize(
    "name,value,key,kept",
    [
        ("EMBER_FUSION_QUEUE_LIMIT", "many", "fusion.queue_limit", 256),
        ("EMBER_FUSION_QUEUE_LIMIT", "0", "fusion.queue_limit", 256),
        ("EMBER_FUSION_ENABLED", "maybe", "fusion.enabled", True),
        ("EMBER_AUTOTUNE_LEVEL", "ludicrous", "autotune.level", "balanced"),
    ],
)
def test_bad_env_value_warns_and_keeps_lower_source(monkeypatch, name, value, key, kept):
    monkeypatch.setenv(name, value)
    with pytest.warns(ConfigWarning, match=name) as rec:
        config.reload()
    assert len(rec) == 1
    assert config.get(key) == kept
    assert origins()[key] == "default"


def test_aliases(clean_env, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", "rel/cache")
    monkeypatch.setenv("EMBER_DEBUG_LOG", "stderr")
    config.reload()
    assert config.get("cache.root") == str(clean_env / "rel" / "cache")  # relative to the cwd
    assert origins()["cache.root"] == "env:EMBER_CACHE_DIR"
    assert config.get("debug.log") == "stderr"
    assert origins()["debug.log"] == "env:EMBER_DEBUG_LOG"
    monkeypatch.setenv("EMBER_CACHE_ROOT", "/elsewhere")  # the regular name loses to the alias
    config.reload()
    assert config.get("cache.root") == str(clean_env / "rel" / "cache")
    monkeypatch.setenv("EMBER_DEBUG_LOG", "0")  # off
    config.reload()
    assert config.get("debug.log") is None


def test_relative_paths_in_files_are_relative_to_the_file(clean_env):
    write(clean_env / "ember.toml", "[cache]\nroot = 'build/cache'\n[debug]\nlog = 'logs/ember.log'\n")
    sub = clean_env / "a" / "b"
    sub.mkdir(parents=True)
    os.chdir(sub)
    config.reload()
    assert config.get("cache.root") == str(clean_env / "build" / "cache")
    assert config.get("debug.log") == str(clean_env / "logs" / "ember.log")
    write(clean_env / "ember.toml", "[cache]\nroot = 'project'\n[debug]\nlog = 'stdout'\n")
    config.reload()
    assert config.get("cache.root") == "project"
    assert config.get("debug.log") == "stdout"


def test_unknown_keys_in_files_warn_once_each_naming_file_and_key(clean_env):
    p = write(clean_env / "ember.toml", "[autotune]\nlevle = 'full'\n[compilation]\ncache = false\n")
    with pytest.warns(ConfigWarning) as rec:
        config.reload()
    assert len(rec) == 1
    msg = str(rec[0].message)
    assert str(p) in msg and "autotune.levle" in msg
    assert config.get("compilation.cache") is False  # the rest of the file still applies
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config.get("compilation.cache")  # no warning again until the next reload

    pp = write(clean_env / "pyproject.toml", "[tool.ember]\nverbose = true\n[tool.ember.fusion]\nsize = 3\n")
    p.unlink()
    with pytest.warns(ConfigWarning) as rec:
        config.reload()
    msgs = sorted(str(w.message) for w in rec)
    assert len(msgs) == 2
    assert all(str(pp) in m for m in msgs)
    assert "tool.ember.fusion.size" in msgs[0] and "tool.ember.verbose" in msgs[1]


def test_wrong_types_in_files_warn(clean_env):
    write(clean_env / "ember.toml", "[compilation]\ncache = 'yes'\n[fusion]\nqueue_limit = true\n")
    with pytest.warns(ConfigWarning) as rec:
        config.reload()
    assert len(rec) == 2
    assert config.get("compilation.cache") is True
    assert config.get("fusion.queue_limit") == 256


def test_invalid_toml_warns_and_is_ignored(clean_env):
    p = write(clean_env / "ember.toml", "[compilation\ncache = false\n")
    with pytest.warns(ConfigWarning, match="cannot read") as rec:
        config.reload()
    assert len(rec) == 1 and str(p) in str(rec[0].message)
    assert config.get("compilation.cache") is True


def test_reload_sees_changes_and_bumps_generation(clean_env, monkeypatch):
    g = config.generation()
    assert config.get("autotune.level") == "balanced"
    monkeypatch.setenv("EMBER_AUTOTUNE_LEVEL", "minimal")
    assert config.get("autotune.level") == "balanced"  # cached until reload
    config.reload()
    assert config.get("autotune.level") == "minimal"
    assert config.generation() > g


def test_override_is_highest_and_temporary(monkeypatch):
    monkeypatch.setenv("EMBER_AUTOTUNE_LEVEL", "minimal")
    config.reload()
    with config.override({"autotune.level": "full", "fusion.queue_limit": 8, "debug.log": None}):
        assert config.get("autotune.level") == "full"
        assert config.get("fusion.queue_limit") == 8
        assert origins()["autotune.level"] == "override"
    assert config.get("autotune.level") == "minimal"
    with pytest.raises(ValueError):
        with config.override({"autotune.level": "turbo"}):
            pass
    with pytest.raises(KeyError):
        with config.override({"no.such": 1}):
            pass


def test_effective_lists_every_key_in_order():
    eff = config.effective()
    assert [k for k, _, _ in eff] == config.keys()
    assert all(isinstance(o, str) for _, _, o in eff)
    assert config.env_name("autotune.disable_cache") == "EMBER_AUTOTUNE_DISABLE_CACHE"


def test_config_command_prints_aligned_table(clean_env, monkeypatch, capsys):
    p = write(clean_env / "ember.toml", "[fusion]\nqueue_limit = 12\n")
    monkeypatch.setenv("EMBER_AUTOTUNE_LEVEL", "full")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(clean_env / "c"))
    config.reload()
    assert commands.config_main([]) == 0
    out = capsys.readouterr().out.splitlines()
    header = out[0]
    assert header.split() == ["key", "value", "origin"]
    rows = {line.split()[0]: line for line in out[1 : 1 + len(config.keys())]}
    assert rows["autotune.level"].split() == ["autotune.level", "full", "env:EMBER_AUTOTUNE_LEVEL"]
    assert rows["fusion.queue_limit"].split() == ["fusion.queue_limit", "12", str(p)]
    assert rows["compilation.cache"].split() == ["compilation.cache", "true", "default"]
    # aligned: every origin starts in the same column as the header's
    col = header.index("origin")
    assert all(line[col - 2 : col] == "  " and line[col] != " " for line in rows.values())
    assert any(str(p) in line for line in out if line.startswith("config files"))
    assert any(line.startswith("cache root:") and str(clean_env / "c") in line for line in out)

    assert commands.config_main(["--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert {"key": "autotune.level", "value": "full", "origin": "env:EMBER_AUTOTUNE_LEVEL"} in data
    assert commands.config_main(["--bogus"]) == 2
