"""21. Pull requests (issue #41), against the GitHub double on loopback (tests/forge/: every
request checked against GitHub's OpenAPI description) and a real git remote over smart
HTTP behind the token (git http-backend).

- Push to pull request opened: the engine's `RepoMirror.push` (under its lease) and
  `landing.open_or_update` (found by its head, then opened), against `git push` and one
  POST by hand (httpx), alternating in the same run. Target: <= 1.2x.
- Waiting for CI: the requests that count against the rate limit per minute of a CI run
  of 25 minutes, polled at `ci.poll_delay`, whose checks change five times. A 304 to a
  conditional request does not count (GitHub's docs). Target: <= 1 per minute.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import Row, Stat, git_env, info_row, ratio_row

SLUG = "me/app"
TOKEN = "github_pat_" + "b" * 82


def _double():
    """The double and the description it checks against, or None when npm cannot fetch it."""
    from tests.forge import openapi
    from tests.forge.github_double import GitHubDouble

    try:
        openapi.openapi()
    except BaseException as e:  # pytest.skip's exception: no npm, or no registry
        if type(e).__name__ != "Skipped":
            raise
        return None
    double = GitHubDouble(TOKEN)
    double.repo(SLUG)
    return double


def _commit(work: Path, n: int, env: dict[str, str]) -> None:
    (work / f"f{n}.txt").write_text(f"{n}\n")
    subprocess.run(["git", "add", f"f{n}.txt"], cwd=work, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"change {n}"], cwd=work, env=env, check=True)


def _by_hand(work: Path, url: str, api: str, branch: str, env: dict[str, str]) -> None:
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    header = f"http.extraHeader=Authorization: Basic {basic}"
    subprocess.run(["git", "-c", header, "push", "-q", url, f"HEAD:refs/heads/{branch}"], cwd=work, env=env, check=True)
    answer = httpx.post(
        f"{api}/repos/{SLUG}/pulls",
        json={"title": branch, "head": branch, "base": "main", "body": "by hand"},
        headers={"Authorization": f"Bearer {TOKEN}", "User-Agent": "bench", "Accept": "application/vnd.github+json"},
    )
    answer.raise_for_status()


def push_to_pull_request(base: Path, double, reps: int) -> list[Row]:
    from mp_engine.config.repos import RepoConfig
    from mp_engine.forge.landing import PullRequestReport, open_or_update
    from mp_engine.forge.repository import open_repository
    from tests.forge.githttp import GitHttp

    (base / "served").mkdir()
    served = GitHttp(base / "served", TOKEN)
    try:
        served.bare(SLUG)
        url = f"{served.url}/{SLUG}.git"
        repo = RepoConfig(url=url, token_env="T", api_url=double.url, forge="github")
        repository = open_repository(base / "repos", "app", repo, {"T": TOKEN})
        mirror, forge = repository.mirror, repository.forge
        mirror.fetch()
        work = mirror.worktree("bench", "mp/bench", mirror.start_point("mp/bench", "main"))
        env = git_env()
        engine, hand = [], []
        for i in range(reps + 1):
            _commit(work, 2 * i, env)
            t = time.perf_counter()
            mirror.push(work, f"mp/MP-9.{i}", None)
            report = PullRequestReport(f"MP-9.{i}", "bench", "run", "EXACT")
            open_or_update(forge, head=f"mp/MP-9.{i}", base="main", report=report, redact=lambda s: s)
            engine.append(time.perf_counter() - t)
            _commit(work, 2 * i + 1, env)
            t = time.perf_counter()
            _by_hand(work, url, double.url, f"hand-{i}", env)
            hand.append(time.perf_counter() - t)
        repository.close()
    finally:
        served.close()
    value, baseline = Stat.of(engine[1:]).scaled(1000), Stat.of(hand[1:]).scaled(1000)
    return [ratio_row("21. push to pull request opened", value, "git push + one POST by hand", baseline, 1.2)]


def ci_wait(double) -> list[Row]:
    from mp_engine.forge.ci import CiState, judge, poll_delay
    from mp_engine.forge.credentials import Token
    from mp_engine.forge.github import GitHubForge

    sha = "c" * 40
    repo = double.repo(SLUG)
    forge = GitHubForge(SLUG, double.url, Token(TOKEN, "T"))
    test, lint = repo.add_check(sha, "test", status="queued"), repo.add_check(sha, "lint", status="queued")
    # seconds into the wait -> what changes then (five changes in 25 minutes)
    changes = {
        60: ("test", "in_progress"),
        90: ("lint", "in_progress"),
        300: ("lint", "completed"),
        600: ("status", "pending"),
        1500: ("test", "completed"),
    }
    counted, polls, waited = double.counted(), 0, 0.0
    while True:
        for at, (name, status) in list(changes.items()):
            if waited >= at:
                if name == "status":
                    repo.add_status(sha, "ci/docs", "success")
                else:
                    run = test if name == "test" else lint
                    run.status, run.conclusion = status, "success" if status == "completed" else None
                del changes[at]
        polls += 1
        if judge(forge.ci(sha), waited, timeout=1800).state is not CiState.WAITING:
            break
        waited += poll_delay(waited)
    forge.close()
    minutes = max(waited, 60.0) / 60
    per_minute = (double.counted() - counted) / minutes
    row = Row(
        "21. waiting for CI: requests counted against the rate limit",
        Stat(per_minute, per_minute, 1),
        "-",
        None,
        "<= 1 per minute",
        per_minute <= 1.0,
        "req/min",
    )
    return [
        row,
        info_row(
            "21. waiting for CI: polls (conditional)", Stat(polls / minutes, polls / minutes, 1), unit="polls/min"
        ),
    ]


def run(reps: int) -> list[Row]:
    double = _double()
    if double is None:
        return [
            info_row("21. pull requests: skipped (npm could not fetch GitHub's OpenAPI description)", Stat(0, 0, 1))
        ]
    try:
        with tempfile.TemporaryDirectory(prefix="mpe-bench-pr-") as d:
            return push_to_pull_request(Path(d), double, reps) + ci_wait(double)
    finally:
        double.close()
