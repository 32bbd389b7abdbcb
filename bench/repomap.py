"""16. Context compilation's and the planner's own time (issue #17): the repository map of a
2,000-file repository (Python modules of a few classes and functions each, in 40 packages,
committed), built cold (every file parsed with tree-sitter), refreshed with nothing changed
(the cache), and refreshed after 10 files changed; the compiled context of a task naming two
files, and its size against `token_budget`; the planner's prompt for that repository (goal,
checks, the map within `token_budget`) and its size; the validation of a 30-task plan.

Baseline, in the same run: `git ls-files` of the repository (the listing the map starts
from). Targets (issue #17): the cold map under 1 s; a refresh re-parses only changed files.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench.common import Row, Stat, git, git_env

FILES = 2000
CHANGED = 10
BUDGET = 8000

MODULE = '''"""Module {i}."""

import os


class Service{i}(Base):
    """A service."""

    def __init__(self, config: dict) -> None:
        self.config = config

    def get(self, key: str, default: int = 0) -> int:
        value = self.config.get(key, default)
        return int(value)

    async def refresh(self, *, force: bool = False) -> None:
        if force:
            self.config.clear()


def helper_{i}(a: int, b: int) -> int:
    return a + b
'''


def make_repo(root: Path) -> None:
    for i in range(FILES):
        pkg = root / f"pkg{i % 40:02d}"
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / f"mod{i:04d}.py").write_text(MODULE.format(i=i))
    env = git_env()
    for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-qm", "files")):
        git(root, *args, env=env)


def run(reps: int) -> list[Row]:
    from mp_engine.agent.prompt.context import compile_context, tokens
    from mp_engine.agent.prompt.repomap import RepoMap

    cold, warm, changed, listing = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="mpe-bench-repomap-") as tmp:
        root = Path(tmp) / "repo"
        make_repo(root)
        RepoMap(root).refresh()  # warm-up: the grammar loads once per process, disk cache
        for rep in range(reps):
            t0 = time.perf_counter()
            git(root, "ls-files", "-z")
            listing.append((time.perf_counter() - t0) * 1000)
            m = RepoMap(root, Path(tmp) / f"cache{rep}.json")
            t0 = time.perf_counter()
            m.refresh()
            cold.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            m.refresh()
            warm.append((time.perf_counter() - t0) * 1000)
            for k in range(CHANGED):
                f = root / f"pkg{k:02d}" / f"mod{k:04d}.py"
                f.write_text(MODULE.format(i=k) + f"\n\ndef added_{rep}(x): pass\n")
                st = f.stat()
                os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * (rep + 1)))
            t0 = time.perf_counter()
            m.refresh()
            changed.append((time.perf_counter() - t0) * 1000)
            if m.parsed != CHANGED:
                raise RuntimeError(f"a refresh after {CHANGED} changes parsed {m.parsed} files")
        task = "Fix `pkg00/mod0000.py` and `pkg01/mod0001.py`."
        compiled_cold, compiled_warm = [], []
        for rep in range(reps):  # what a prompt costs: only the files whose signatures fit are parsed
            m = RepoMap(root, Path(tmp) / f"ctx{rep}.json")
            t0 = time.perf_counter()
            size = tokens(compile_context(task, m, BUDGET))
            compiled_cold.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            compile_context(task, m, BUDGET)
            compiled_warm.append((time.perf_counter() - t0) * 1000)
        parsed_for_prompt = len(m.files)
        planner_ms, planner_tokens = planner_prompts(root, Path(tmp), reps)
        validate_ms = [validation() for _ in range(reps * 20)]
    cold_s, base = Stat.of(cold), Stat.of(listing)
    rows = [
        Row(
            f"16. repository map, {FILES} files, cold (every file parsed)",
            cold_s,
            "git ls-files",
            base,
            "< 1000 ms",
            cold_s.median < 1000,
        ),
        Row("16. map refresh, nothing changed (cache)", Stat.of(warm), "git ls-files", base, "report", None),
        Row(
            f"16. map refresh, {CHANGED} files changed",
            Stat.of(changed),
            "git ls-files",
            base,
            f"parses {CHANGED} files only",
            True,
            note=f"{CHANGED} of {FILES} re-parsed",
        ),
        Row(
            "16. context compilation for one prompt, first / later iterations",
            Stat.of(compiled_cold),
            "git ls-files",
            base,
            "report",
            None,
            note=f"later: {Stat.of(compiled_warm).median:.1f} ms; {parsed_for_prompt} of {FILES} files parsed",
        ),
        Row(
            f"16. compiled context vs token_budget {BUDGET}",
            Stat(size, size, 1),
            "-",
            None,
            f"<= {BUDGET} tokens",
            size <= BUDGET,
            unit="tokens",
            note="two named files, the files beside them with signatures, then paths",
        ),
        Row(
            f"16. planner prompt, {FILES} files (goal, checks, map within the budget), first iteration",
            Stat.of(planner_ms),
            "git ls-files",
            base,
            "report",
            None,
        ),
        Row(
            f"16. planner prompt vs token_budget {BUDGET}",
            Stat(planner_tokens, planner_tokens, 1),
            "-",
            None,
            f"<= {BUDGET} tokens",
            planner_tokens <= BUDGET,
            unit="tokens",
        ),
        Row(
            f"16. plan validation, {PLAN_TASKS} tasks with dependencies (JSON, schema, order)",
            Stat.of(validate_ms),
            "git ls-files",
            base,
            "report",
            None,
        ),
    ]
    return rows


PLAN_TASKS = 30
MP = b"# MP-9.1 Bench plan\nExecutor: agent\nPlan: auto\n\nRefactor the services.\n\n## Validate\n\n" + b"".join(
    b"```bash\ntest -f pkg%02d/mod%04d.py\n```\n\n" % (k, k) for k in range(3)
)


def planner_prompts(root: Path, tmp: Path, reps: int) -> tuple[list[float], int]:
    """The planner's prompt as a run builds it, from a cold map cache each time."""
    from mp_engine.agent.plan import planner as planning
    from mp_engine.agent.prompt.context import fill, tokens
    from mp_engine.agent.prompt.repomap import RepoMap
    from mp_engine.inbox.mpfile import parse

    mp = parse(MP)
    times, size = [], 0
    for rep in range(reps):
        m = RepoMap(root, tmp / f"plan{rep}.json")
        t0 = time.perf_counter()
        text = fill(
            BUDGET,
            lambda context: planning.prompt(mp=mp, goal=mp.title, nonce="0" * 32, round_=0, done=[], repo_map=context),
            "",
            lambda m=m: m,
        )
        times.append((time.perf_counter() - t0) * 1000)
        size = tokens(text)
    return times, size


def validation() -> float:
    import json

    from mp_engine.agent.plan import planner as planning
    from mp_engine.inbox.mpfile import parse

    mp = parse(MP)
    plan = {
        "tasks": [
            {
                "id": f"t{k}",
                "title": f"refactor service {k}",
                "description": f"Split `pkg{k % 40:02d}/mod{k:04d}.py`.",
                "depends_on": [f"t{j}" for j in range(max(0, k - 2), k)],
                "files": [f"pkg{k % 40:02d}/mod{k:04d}.py"],
                "checks": [f"check-{k % 3 + 1:03d}"],
            }
            for k in reversed(range(PLAN_TASKS))
        ]
    }
    raw = json.dumps(plan)
    t0 = time.perf_counter()
    planning.validate(raw, mp, {}, 1)
    return (time.perf_counter() - t0) * 1000
