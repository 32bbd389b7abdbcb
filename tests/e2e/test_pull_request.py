"""An agent MP on another repository, landed as a pull request and carried through CI, in
the real daemon (issue #41): the repository a real git remote over HTTP behind a token, the
forge the GitHub double (tests/forge/), which checks every request against GitHub's OpenAPI
description, and a CI of the test's own that judges each pushed commit."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import threading

import pytest

from mp_engine.core.workspace import Workspace
from tests.agentutil import calls, configure, level, only_run
from tests.conftest import drop, read_state, result_field, wait_for
from tests.forge import openapi
from tests.forge.githttp import GitHttp
from tests.forge.github_double import GitHubDouble
from tests.gitutil import toml_value

pytestmark = pytest.mark.daemon
SLUG = "me/app"
MP = """# MP-41.1 A greeting in the app
Executor: agent
Repo: app

Write "hello" to `hello.txt`.

## Validate

```bash
grep -qx hello hello.txt
```
"""
# What the test's CI says of a commit without ci.txt: its log carries the fix, in words the
# fake agents carry out, so the next round's prompt (which quotes it) makes CI pass.
RED = 'collecting ...\nFAILED tests/test_ci.py::test_marker - ci.txt is missing\nTo fix: Write "ok" to `ci.txt`.\n'


class Ci:
    """CI on the pull request's pushes: each new tip of the work branch gets one check run,
    red while the commit has no ci.txt, green once it has (or always red: `fixable=False`)."""

    def __init__(self, double: GitHubDouble, bare, branch: str, *, fixable: bool = True):
        self.double, self.bare, self.branch, self.fixable = double, bare, branch, fixable
        self.judged: list[tuple[str, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _tip(self) -> str | None:
        out = subprocess.run(
            ["git", "-C", str(self.bare), "rev-parse", "-q", "--verify", f"refs/heads/{self.branch}"],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() or None

    def _watch(self) -> None:
        while not self.stop.wait(0.1):
            sha = self._tip()
            if sha is None or any(s == sha for s, _ in self.judged):
                continue
            has = subprocess.run(["git", "-C", str(self.bare), "cat-file", "-e", f"{sha}:ci.txt"]).returncode == 0
            conclusion = "success" if has and self.fixable else "failure"
            run = self.double.repo(SLUG).add_check(sha, "tests", conclusion=conclusion, summary=f"tests {conclusion}")
            if conclusion == "failure":
                self.double.logs[run.id] = RED
            self.judged.append((sha, conclusion))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.fixture
def forge(tmp_path):
    openapi.openapi()  # GitHub's description, from npm (skips with the reason when npm is missing)
    token = "github_pat_" + secrets.token_hex(40)
    double = GitHubDouble(token)
    double.repo(SLUG)
    (tmp_path / "served").mkdir()
    served = GitHttp(tmp_path / "served", token)
    bare = served.bare("me/app")
    double.remotes[SLUG] = str(bare)
    yield token, double, served, bare
    served.close()
    double.close()
    assert double.violations == [], "requests or answers GitHub's description does not allow"


def files(root) -> list:
    """Every file under `root` the run may have written (the channel's own .git aside)."""
    return [p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts[:1]]


def ended(ws: Workspace, d) -> bool:
    """The MP has its result; a daemon that stopped on its own fails the test at once."""
    assert d.proc.poll() is None, d.output()
    return result_field(ws, "Status") in ("COMPLETED", "ERROR")


def setup(ws: Workspace, tmp_path, forge, **repo) -> tuple[dict[str, str], object]:
    token, double, served, bare = forge
    log = tmp_path / "calls.jsonl"
    configure(ws, [level("fast", "good.py", "--log", str(log))])
    table = {
        "url": f"{served.url}/me/app.git",
        "api_url": double.url,
        "forge": "github",
        "token_env": "APP_TOKEN",
        "land": "pull_request",
        "ci_poll": 0.2,
        **repo,
    }
    with ws.config_file.open("a") as f:
        f.write("\n[repos.app]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items()))
    return {"APP_TOKEN": token}, log


def test_red_ci_goes_back_to_the_agent_and_green_ends_the_run_with_one_pull_request(
    ws, daemon_factory, tmp_path, forge
):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, ci_rounds=2)
    ci = Ci(double, bare, "mp/MP-41.1")
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    finally:
        ci.close()
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text()
    assert [c for _, c in ci.judged] == ["failure", "success"]  # two pushes: red, then green
    pulls = list(double.repo(SLUG).pulls.values())
    assert len(pulls) == 1 and pulls[0].head == "mp/MP-41.1" and pulls[0].base == "main"  # one pull request
    result = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    pr = result["pull_request"]
    assert pr["number"] == pulls[0].number and pr["head_sha"] == ci.judged[-1][0]
    assert [r["state"] for r in pr["ci_rounds"]] == ["failed", "passed"]
    # The second round's prompt quotes what CI said; its task made CI pass.
    run = only_run(ws)
    assert [c["mt"] for c in calls(log)] == ["MT-001", "MT-002"]
    prompt = (run.dir / "agent" / "MT-002" / "iter-001" / "prompt.md").read_text()
    assert "ci.txt is missing" in prompt and "Make CI pass" in prompt
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="the state back to ONLINE after the result")
    d.signal(signal.SIGTERM)
    d.wait()
    # The token never left the process that holds it: no file the engine wrote has it.
    assert not [p for p in files(ws.root) if token.encode() in p.read_bytes()]


def test_ci_red_with_the_rounds_used_up_ends_blocked_and_leaves_the_pull_request_open(
    ws, daemon_factory, tmp_path, forge
):
    token, double, served, bare = forge
    env, log = setup(ws, tmp_path, forge, ci_rounds=1)
    ci = Ci(double, bare, "mp/MP-41.1", fixable=False)
    d = daemon_factory(ws.root, env=env).start()
    try:
        drop(ws, MP)
        wait_for(lambda: ended(ws, d), timeout=120, what=lambda: d.output())
    finally:
        ci.close()
    assert result_field(ws, "Status") == "ERROR"
    text = ws.result_file.read_text()
    assert "ci_failed" in text and "tests" in text
    pulls = list(double.repo(SLUG).pulls.values())
    assert len(pulls) == 1 and pulls[0].state == "open"
    assert [c for _, c in ci.judged] == ["failure"]  # one round: no fix pushed
    d.signal(signal.SIGTERM)
    d.wait()
