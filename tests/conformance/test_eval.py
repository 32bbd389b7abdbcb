"""Conformance (issue #43): `mp-engine eval --demo` with the real `claude` CLI, configured as
docs/AGENT.md says, against the scripted fake Anthropic API. Two configurations, told apart by
the model their level asks for: `strong` is scripted to fix every demo task; `cheap` fixes
one, writes where the hidden tests of another go (which must not help it), and claims the
rest without a change. The resolve rates, the counts and the paired comparison must come out
exactly as scripted."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from mp_engine.eval.demo import specs
from tests.conformance import fakemodel as fm
from tests.conformance.clis import installed
from tests.conformance.test_claude import ENV, claude_level
from tests.e2e.cli import MP_ENGINE
from tests.gitutil import toml_value

pytestmark = pytest.mark.conformance

FIXES = {s["instance_id"]: s["fix"] for s in specs()}
HIDDEN = {s["instance_id"]: s["hidden"] for s in specs()}
CHEAP_FIXES = {"demo-wordcount"}
CHEAP_CHEATS = {"demo-semver"}


def work_of(model: str, task: str) -> dict[str, str]:
    """The files the scripted model writes for `task`: the fix, a cheat (the hidden tests'
    files, rewritten to pass without a fix), or nothing."""
    if "strong" in model or task in CHEAP_FIXES:
        return FIXES[task]
    if task in CHEAP_CHEATS:
        return {
            path: "import unittest\n\n\nclass Passing(unittest.TestCase):\n    def test_ok(self):\n        pass\n"
            for path in HIDDEN[task]
        }
    return {}


def scripted(req: dict, count: int) -> fm.Turn:
    """One conversation per task: for each file of the work, Read it (claude writes only a file
    it has read), then Write it; then claim."""
    said = fm.user_text(req)
    task = re.search(r"\bdemo-[a-z]+\b", said)
    if task is None or "NONCE: " not in said:  # a call that is not the engine's (a title, a probe)
        return fm.text("ok")
    files = list(work_of(str(req.get("model")), task.group(0)).items())
    results = sum(
        1
        for m in req.get("messages") or []
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    if results < 2 * len(files):
        path, content = files[results // 2]
        where = f"{fm.workdir_of(req)}/{path}"
        return (
            fm.tool("Read", file_path=where) if results % 2 == 0 else fm.tool("Write", file_path=where, content=content)
        )
    return fm.text(f"Done with {task.group(0)}.\n\n" + fm.status_block(fm.nonce_of(req)))


def config(path, exe, model: str):
    level = claude_level(exe, "json")
    level["argv"] = [*level["argv"], "--model", model]
    lines = ["[agent]", "max_iterations = 2", "transient_backoff = 0.0", "", "[[agent.levels]]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in level.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_demo_set_with_the_real_claude_comes_out_exactly_as_scripted(tmp_path):
    exe = installed("claude")
    home = tmp_path / "home"
    home.mkdir()
    cheap = config(tmp_path / "cheap.toml", exe, "cheap-model")
    strong = config(tmp_path / "strong.toml", exe, "strong-model")
    with fm.FakeAnthropic(scripted) as api:
        env = {**os.environ, **ENV, "HOME": str(home), "ANTHROPIC_BASE_URL": api.url}
        out = tmp_path / "out"
        args = [MP_ENGINE, "eval", "--demo", "--config", str(cheap), "--config", str(strong), "--parallel", "2"]
        r = subprocess.run([*args, "--out", str(out)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads((out / "report.json").read_text())
    c, s = doc["configs"]
    assert (c["resolved"], c["judged"], s["resolved"], s["judged"]) == (1, 4, 4, 4), r.stdout
    assert c["exact_unresolved"] == 3  # the cheat and the two bare claims passed the engine's own checks
    assert s["cost_usd"] is not None and s["tokens"]["input"] > 0  # as claude's JSON result reported them
    (k,) = doc["comparisons"]
    assert (k["both"], k["only_a"], k["only_b"], k["neither"], k["p_value"]) == (1, 0, 3, 0, 0.25)
    semver = next(t for t in doc["per_task"] if t["instance_id"] == "demo-semver")
    assert semver["cheap"]["verdict"] == "unresolved" and semver["strong"]["verdict"] == "resolved"
