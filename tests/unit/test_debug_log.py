"""ember.environment.log: EMBER_DEBUG_LOG destinations, categories, header, the compilation block."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import timeit
from pathlib import Path

import pytest

from ember.environment import config, log
from ember.environment.config import ConfigWarning

SOURCE = "void kernel_add_f32_2f077c2a(float* a, float* b, float* out) {\n    out[0] = a[0] + b[0];\n}\n"


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("EMBER_"):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(log, "_notes", [])  # header notes of other tests are not ours
    config.reload()
    yield work
    monkeypatch.undo()
    config.reload()
    log.configure()  # remove our handler if the test installed one


def turn_on(monkeypatch, dest: str, categories: str | None = None) -> None:
    monkeypatch.setenv("EMBER_DEBUG_LOG", dest)
    if categories is not None:
        monkeypatch.setenv("EMBER_DEBUG_LOG_CATEGORIES", categories)
    config.reload()


def test_off_by_default(capsys):
    for c in log.CATEGORIES:
        assert log.enabled(c) is False
    log.compile_block("k", "KernelId(k)", "c", SOURCE, cached=False, origin="")
    log.logger("autotune").debug("invisible")
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    assert log.destination() is None
    assert logging.getLogger("ember.compile").propagate is True  # left alone while off


def test_unknown_category_is_an_error():
    with pytest.raises(ValueError, match="compilation"):
        log.enabled("compilaton")
    assert log.logger("compile").name == "ember.compile"  # short aliases of the logger names
    assert log.logger("perf").name == "ember.perf"


def test_stdout_block_and_header(monkeypatch, capsys):
    turn_on(monkeypatch, "stdout")
    assert all(log.enabled(c) for c in log.CATEGORIES)
    log.compile_block(
        "kernel_add_f32_2f077c2a",
        "KernelId { type: add, cube_dim: (256, 1, 1) }",
        "c",
        SOURCE,
        cached=False,
        origin="cc -O3",
    )
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("ember debug log")
    assert log.DISTORTION_NOTE == (
        "ember debug log: kernel timings and autotune choices made while it is on may be distorted"
    )
    assert lines[1] == log.DISTORTION_NOTE
    block = "\n".join(lines[2:])
    assert block == (
        "[START_KERNEL_COMPILATION]\n"
        "name: kernel_add_f32_2f077c2a\n"
        "id: KernelId { type: add, cube_dim: (256, 1, 1) }\n"
        "compiled by: cc -O3\n"
        "source:\n"
        "```c\n" + SOURCE.rstrip("\n") + "\n"
        "```\n"
        "[END_KERNEL_COMPILATION]"
    )


def test_cached_block_says_where_from(monkeypatch, capsys):
    turn_on(monkeypatch, "stdout")
    log.compile_block("k1", "KernelId(k1)", "c", SOURCE, cached=True, origin="compile/cpu/ab12: /x/k1.so")
    log.compile_block("k2", "KernelId(k2)", "c", "", cached=True, origin="compile/cpu/ab12: /x/k2.so")
    out = capsys.readouterr().out
    first, second = out.split("[END_KERNEL_COMPILATION]")[:2]
    assert "loaded from store: compile/cpu/ab12: /x/k1.so" in first
    assert first.index("loaded from store") < first.index("source:")  # before the source
    assert "loaded from store: compile/cpu/ab12: /x/k2.so" in second
    assert "source:" not in second  # nothing to show when the caller has no source


def test_stderr_and_single_line_records(monkeypatch, capsys):
    turn_on(monkeypatch, "stderr")
    log.logger("autotune").debug("candidate %s: median %.3g s", "tiled", 0.0125)
    out, err = capsys.readouterr()
    assert out == ""
    assert "[ember.autotune] candidate tiled: median 0.0125 s" in err.splitlines()
    assert logging.getLogger("ember.autotune").propagate is False  # not printed twice via root


def test_file_destination(monkeypatch, tmp_path, capsys):
    path = tmp_path / "logs" / "debug.log"
    turn_on(monkeypatch, str(path))
    assert log.destination() == str(path)
    log.logger("fusion").debug("block 0: elementwise fuser, 5 ops")
    log.compile_block("k", "id", "wgsl", "fn main() {}", cached=False, origin="")
    text = path.read_text()
    assert text.splitlines()[1] == log.DISTORTION_NOTE
    assert "[ember.fusion] block 0: elementwise fuser, 5 ops" in text
    assert "```wgsl\nfn main() {}\n```" in text
    assert capsys.readouterr() == ("", "")


def test_unopenable_file_warns_once_and_stays_off(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    turn_on(monkeypatch, str(blocker / "debug.log"))
    with pytest.warns(ConfigWarning, match="cannot open") as rec:
        assert log.enabled("compilation") is False
        assert log.enabled("autotune") is False
    assert len(rec) == 1


def test_categories_filter(monkeypatch, capsys):
    turn_on(monkeypatch, "stdout", "compilation, autotune")
    assert log.enabled("compilation") and log.enabled("autotune")
    assert not log.enabled("performance") and not log.enabled("fusion")
    log.logger("performance").debug("launch 1 us")  # a disabled category prints nothing
    log.logger("autotune").debug("winner tiled")
    out = capsys.readouterr().out
    assert "winner tiled" in out and "launch 1 us" not in out
    assert "categories compilation, autotune" in out.splitlines()[0]


def test_unknown_category_in_filter_warns(monkeypatch):
    turn_on(monkeypatch, "stdout", "compilation,bogus")
    with pytest.warns(ConfigWarning, match="bogus"):
        assert log.enabled("compilation")


def test_configure_is_idempotent_and_header_written_once(monkeypatch, capsys):
    turn_on(monkeypatch, "stdout")
    log.configure()
    log.configure()
    config.reload()  # same destination: same handler, no new header
    log.enabled("fusion")
    log.logger("fusion").debug("one")
    out = capsys.readouterr().out
    assert out.count(log.DISTORTION_NOTE) == 1
    assert out.count("[ember.fusion] one") == 1  # one handler, one line
    assert len(logging.getLogger("ember.fusion").handlers) == 1


def test_header_notes(monkeypatch, capsys):
    log.header_note("cpu runtime: launches synchronise while the log is on")  # before configure
    turn_on(monkeypatch, "stdout")
    log.enabled("compilation")
    log.header_note("cpu runtime: launches synchronise while the log is on")  # again: ignored
    log.header_note("autotune: bounds computed with the log on")  # after the header: written now
    out = capsys.readouterr().out.splitlines()
    assert out[1] == log.DISTORTION_NOTE
    assert out[2] == "cpu runtime: launches synchronise while the log is on"
    assert out[3] == "autotune: bounds computed with the log on"
    assert len(out) == 4


def test_turning_off_after_reload_removes_handler(monkeypatch, capsys):
    turn_on(monkeypatch, "stdout")
    assert log.enabled("compilation")
    monkeypatch.delenv("EMBER_DEBUG_LOG")
    config.reload()
    assert not log.enabled("compilation")
    log.logger("compilation").debug("gone")
    assert "gone" not in capsys.readouterr().out
    lg = logging.getLogger("ember.compile")
    assert lg.handlers == [] and lg.propagate is True and lg.level == logging.NOTSET


def test_enabled_is_cheap():
    log.enabled("compilation")
    per_call = min(timeit.repeat(lambda: log.enabled("compilation"), number=20000, repeat=3)) / 20000
    assert per_call < 2e-6  # a cached lookup, not a config read


def test_new_process_with_env_var(tmp_path):
    """The variable alone is enough, in a fresh interpreter (no explicit configure call)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_DEBUG_LOG"] = "stdout"
    env["PYTHONPATH"] = str(Path(log.__file__).resolve().parents[2])
    code = (
        "from ember.environment import log\n"
        "log.compile_block('k', 'id', 'c', 'int x;', cached=False, origin='')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert "[START_KERNEL_COMPILATION]\nname: k\nid: id\nsource:\n```c\nint x;\n```" in r.stdout
