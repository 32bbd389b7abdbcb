"""22. The cost of issue #42's gates, per iteration and per call.

Protected paths: a 2,000-file repository (the Python modules of figure 16 in 40 packages,
200 test files under tests/ with conftest.py files, a CI workflow, committed) and an MP
whose check is `pytest -q tests`: the protected set read once from the base commit, then
the per-iteration look (`Protected.touched`: a stat per protected file, the watched
directories listed) with nothing changed, and after a protected file was rewritten (its
content hashed, then restored by git). Baseline, same run: the workspace fingerprint
every iteration takes anyway (`Worktree.snapshot`, one `git status`).

Budgets: the check before every call (`Spending.refusal`) with the spend log holding a
month of calls (3,000 lines, as 100 calls a day would leave), and a call's charge
(one fsync'd append). Baseline, same run: the hourly call limit's check before every call
(`CallLimiter.next_slot`), at its limit of 100 calls in the window.

Targets (issue #42): detection at most 5 ms per iteration; the budget check under 1 ms per call.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench.common import Row, Stat, git, git_env, info_row
from bench.repomap import MODULE

FILES = 2000
TESTS = 200
CALLS = 3000
MP = """# MP-22.1 Gates
Executor: agent

Make the tests pass.

## Validate

```bash
pytest -q tests
```
"""


def make_repo(root: Path) -> None:
    for i in range(FILES - TESTS):
        pkg = root / f"pkg{i % 40:02d}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / f"mod{i:04d}.py").write_text(MODULE.format(i=i))
    for i in range(TESTS):
        d = root / "tests" / f"area{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"test_mod{i:04d}.py").write_text(f"def test_{i}():\n    assert {i} == {i}\n")
    (root / "tests" / "conftest.py").write_text("import sys\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "ci.yml").write_text("on: push\njobs: {}\n")
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-q"\n')
    env = git_env()
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "files")):
        git(root, *args, env=env)


def ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


def protected_rows(reps: int) -> list[Row]:
    from mp_engine.agent.evidence import Worktree
    from mp_engine.agent.judge.protected import Protected
    from mp_engine.inbox.mpfile import parse

    mp = parse(MP.encode())
    build, clean, changed, restore, fingerprint = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-gates-") as tmp:
        root = Path(tmp) / "repo"
        make_repo(root)
        base = git(root, "rev-parse", "HEAD").strip()
        target = root / "tests" / "area3" / "test_mod0003.py"
        original = target.read_text()
        for _ in range(reps):
            t0 = time.perf_counter()
            guard = Protected.at(root, base, mp)
            build.append(ms(t0))
            guard.touched()  # the first look hashes every protected file once
            tree = Worktree(root)
            for _ in range(5):
                t0 = time.perf_counter()
                tree.snapshot()
                fingerprint.append(ms(t0))
                t0 = time.perf_counter()
                found = guard.touched()
                clean.append(ms(t0))
                if found:
                    raise RuntimeError(f"nothing changed, yet {found} was found touched")
            target.write_text(original + "assert True\n")
            t0 = time.perf_counter()
            found = guard.touched()
            changed.append(ms(t0))
            if found != ["tests/area3/test_mod0003.py"]:
                raise RuntimeError(f"the rewritten test was not found: {found}")
            t0 = time.perf_counter()
            guard.restore(found)
            restore.append(ms(t0))
        count = len(guard)
    base_s = Stat.of(fingerprint)
    clean_s, changed_s = Stat.of(clean), Stat.of(changed)
    return [
        Row(
            f"22. protected-path detection per iteration, {FILES}-file repository, nothing changed",
            clean_s,
            "workspace fingerprint (git status)",
            base_s,
            "<= 5 ms",
            clean_s.median <= 5,
            note=f"{count} protected files",
        ),
        Row(
            "22. protected-path detection, one protected file rewritten (hashed)",
            changed_s,
            "workspace fingerprint (git status)",
            base_s,
            "<= 5 ms",
            changed_s.median <= 5,
        ),
        info_row("22. its restore from the base (git checkout)", Stat.of(restore), "workspace fingerprint", base_s),
        info_row(
            "22. the protected set read from the base, once per task", Stat.of(build), "workspace fingerprint", base_s
        ),
    ]


def budget_rows(reps: int) -> list[Row]:
    from mp_engine.agent.call.budget import Spending
    from mp_engine.agent.call.invoke import Call, CallKind
    from mp_engine.agent.call.limiter import CallLimiter
    from mp_engine.config.agent import AgentConfig, AgentLevel, ModelPrice

    level = AgentLevel(name="codex", argv=["codex", "-"], stdin=True)
    cfg = AgentConfig(daily_cost_usd=1e6, monthly_cost_usd=1e7, prices={"codex": ModelPrice(input=1.25, output=10.0)})
    prompt = "x" * 60_000  # a 15 KiB prompt is typical (figure 14); four times that
    check, charge, limiter_s = [], [], []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-budget-") as tmp:
        now = time.time()
        log = Path(tmp) / "agent_spend.log"
        log.write_text(
            "".join(
                json.dumps({"at": now - i * 600, "usd": 0.01, "key": f"r/{i}", "mp": "MP-1"}) + "\n"
                for i in range(CALLS)
                if now - i * 600 > now - 20 * 86400
            )
        )
        spending = Spending.at(Path(tmp), cfg)
        limiter = CallLimiter(Path(tmp) / "agent_calls.log", 100)
        for i in range(100):
            limiter.record(now - i * 30)
        spending.refusal(level, prompt)  # the first look reads the month
        for i in range(reps * 20):
            t0 = time.perf_counter()
            limiter.next_slot(time.time())
            limiter_s.append(ms(t0))
            t0 = time.perf_counter()
            if spending.refusal(level, prompt) is not None:
                raise RuntimeError("the budget refused a call it has room for")
            check.append(ms(t0))
            if i % 10 == 0:
                call = Call(CallKind.OK, usage={"input": 1000, "output": 100, "cache_read": 0, "cache_write": 0})
                t0 = time.perf_counter()
                spending.charge(f"bench/{i}", call, level)
                charge.append(ms(t0))
    base = Stat.of(limiter_s)
    check_s = Stat.of(check)
    return [
        Row(
            "22. budget check per call (day and month, the prompt priced), a month of calls in the log",
            check_s,
            "hourly call limit's check",
            base,
            "< 1 ms",
            check_s.median < 1,
        ),
        info_row("22. a call's charge (one fsync'd append)", Stat.of(charge), "hourly call limit's check", base),
    ]


def run(reps: int) -> list[Row]:
    return [*protected_rows(reps), *budget_rows(reps)]
