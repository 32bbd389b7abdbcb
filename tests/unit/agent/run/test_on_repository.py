"""An agent MP's `Repo:` before anything runs (agent/run/loop.py `_on_repository`): a
repository that cannot be reached makes the run wait; one with no such base, or whose git
fails otherwise, ends it with the one fix, never a wait that lasts forever."""

from __future__ import annotations

import pytest

from mp_engine.agent.run.loop import AgentRun
from mp_engine.config.repos import RepoConfig
from mp_engine.forge.repository import open_repository
from tests.agentutil import agent_context, level
from tests.gitutil import git

MP = """# MP-41.9 A greeting in the app
Executor: agent
Repo: app
{base}
Write "hello" to `hello.txt`.

## Validate

```bash
grep -qx hello hello.txt
```
"""


@pytest.fixture
def served(tmp_path):
    """A bare repository with one commit on `main`."""
    seed, bare = tmp_path / "seed", tmp_path / "app.git"
    seed.mkdir()
    git(seed, "init", "-q", "-b", "main")
    (seed / "README.md").write_text("app\n")
    git(seed, "add", "-A")
    git(seed, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first")
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(bare))
    return bare


def run_on(ws, url: str, base: str = ""):
    ctx = agent_context(ws, MP.format(base=f"Base: {base}\n" if base else ""), [level("good", "good.py")])
    repo = open_repository(ws.local_dir / "repos", "app", RepoConfig(url=url, land="branch", forge="none"), {})
    return AgentRun(ctx, repos={"app": repo}).run()


def test_a_base_the_repository_lacks_ends_the_run_with_the_fix(ws, served):
    res = run_on(ws, served.as_uri(), base="develop")
    assert res.status == "failed" and res.diagnosis.kind == "repository_base"
    assert "has no branch 'develop'" in res.diagnosis.diagnosis and "`Base:`" in res.diagnosis.fix


def test_an_unreachable_repository_makes_the_run_wait(ws):
    res = run_on(ws, "http://127.0.0.1:9/app.git")  # the discard port: the connection is refused
    assert res.status == "waiting", res
    assert res.extra["waiting"]["kind"] == "repository" and res.extra["waiting"]["resume_at"]


def test_the_repository_s_branch_is_where_the_run_works(ws, served):
    res = run_on(ws, served.as_uri())
    assert res.status == "completed", res
    assert git(served, "rev-parse", "--verify", "-q", "refs/heads/mp/MP-41.9").strip()
