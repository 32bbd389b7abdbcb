"""Git polling cost: `git ls-remote` against `git fetch`, on a local bare remote, same run.

The engine polls the remote every `[git] poll_interval` seconds. This measures what one
poll costs when nothing changed (the common case) and when the branch moved, so the
choice "ls-remote first, fetch only when the branch moved" rests on numbers.
Medians of N repetitions; ratios are to `git ls-remote` measured in the same run.

    .venv/bin/python bench/bench_git_poll.py [--reps 30] [--commits 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mp_engine.gitsync import GitSession, noninteractive_env  # noqa: E402

ENV = {
    **os.environ,
    **noninteractive_env(),
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@invalid",
}


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True)


def timed(fn, reps: int) -> float:
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def setup(tmp: Path, commits: int) -> tuple[Path, Path, Path]:
    bare, seed, clone = tmp / "remote.git", tmp / "seed", tmp / "clone"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], env=ENV, check=True)
    subprocess.run(["git", "clone", "-q", str(bare), str(seed)], env=ENV, check=True, capture_output=True)
    for i in range(commits):  # a history shaped like the engine's: one run archive per commit
        d = seed / "SYSTEM" / "runs" / f"run-{i:05d}"
        d.mkdir(parents=True)
        (d / "RESULT.md").write_text(f"# Result {i}\n" + "line\n" * 40)
        (seed / "SESSION_STATE.json").write_text(f'{{"n": {i}}}\n')
        git(seed, "add", "-A")
        git(seed, "commit", "-q", "-m", f"MP-1.{i}: COMPLETED")
    git(seed, "push", "-q", "origin", "HEAD:main")
    subprocess.run(["git", "clone", "-q", f"file://{bare}", str(clone)], env=ENV, check=True, capture_output=True)
    return bare, seed, clone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--commits", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        bare, seed, clone = setup(tmp, args.commits)
        url = f"file://{bare}"

        def ls_remote() -> None:
            subprocess.run(["git", "ls-remote", "--heads", "origin", "refs/heads/main"], cwd=clone, env=ENV,
                           check=True, capture_output=True)  # fmt: skip

        def fetch() -> None:
            subprocess.run(["git", "fetch", "-q", "--no-tags", "origin", "+refs/heads/main:refs/remotes/origin/main"],
                           cwd=clone, env=ENV, check=True, capture_output=True)  # fmt: skip

        def engine_poll() -> None:  # what the daemon pays: open Repo, ls-remote, close
            s = GitSession(clone, 60)
            try:
                s.run("ls-remote", "--heads", "origin", "refs/heads/main")
            finally:
                s.close()

        counter = iter(range(10**9))

        def moved_then_fetch() -> None:  # the branch moved by one commit: ls-remote + fetch
            n = next(counter)
            (seed / "note.txt").write_text(f"{n}\n")
            git(seed, "add", "note.txt")
            git(seed, "commit", "-q", "-m", f"note {n}")
            git(seed, "push", "-q", "origin", "HEAD:main")
            t0 = time.perf_counter()
            ls_remote()
            fetch()
            moved_then_fetch.cost.append((time.perf_counter() - t0) * 1000)

        moved_then_fetch.cost = []  # type: ignore[attr-defined]
        fetch()
        base = timed(ls_remote, args.reps)
        rows = [
            ("`git ls-remote` (unchanged)", base),
            ("`git fetch` (unchanged)", timed(fetch, args.reps)),
            ("engine poll: open Repo + ls-remote + close", timed(engine_poll, args.reps)),
        ]
        for _ in range(args.reps):
            moved_then_fetch()
        rows.append(("branch moved: ls-remote + fetch (1 new commit)", statistics.median(moved_then_fetch.cost)))
        print(f"remote: {url} ({args.commits} commits), medians of {args.reps}, git {git_version()}")
        print()
        print("| poll | ms | ratio to ls-remote |")
        print("|---|---:|---:|")
        for name, ms in rows:
            print(f"| {name} | {ms:.2f} | {ms / base:.1f}x |")


def git_version() -> str:
    return subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]


if __name__ == "__main__":
    main()
