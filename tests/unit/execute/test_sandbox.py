"""The sandbox's rules, and what they do under the real bubblewrap: the worktree writable
and the rest read-only, hidden paths empty, git working in a worktree whose repository is
hidden, a private /tmp, no network but the allowed hosts, and nothing outliving the call.
(The whole thing in the daemon with a hostile fake agent: tests/e2e/test_sandbox_daemon.py.)"""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from mp_engine.config.agent import AgentConfig
from mp_engine.execute.sandbox import Sandbox, confined, for_call, for_checks, problem, summary
from tests.gitutil import git

needs_bwrap = pytest.mark.skipif(problem() is not None, reason=f"the sandbox cannot run here: {problem()}")


def repo_with_worktree(tmp_path: Path) -> tuple[Path, Path]:
    """An engine workspace (a git repository with a secret in its config) and a worktree
    inside it, as an agent MP has."""
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "mp-engine.toml").write_text("[secrets]\nenv = ['TOKEN']\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "workspace")
    git(root, "config", "remote.origin.url", "https://x-access-token:ghp_secret@github.com/me/repo.git")
    work = root / "SYSTEM" / ".engine" / "work" / "run-1"
    git(root, "worktree", "add", "-q", "-b", "mp/run-1", str(work))
    return root, work


def run(box: Sandbox, script: str) -> subprocess.CompletedProcess[str]:
    with confined(box, ["sh", "-c", script]) as argv:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=box.workdir)


def test_the_rules_follow_the_configuration(tmp_path):
    cfg = AgentConfig(
        sandbox="none",
        sandbox_hide=["~/secret-dir"],
        sandbox_allow_hosts=["pypi.org"],
        levels=[
            {
                "name": "a",
                "argv": ["a", "{prompt}"],
                "sandbox": "os",
                "sandbox_rw": ["~/.a"],
                "sandbox_allow_hosts": ["api.a.com:443"],
            },
            {"name": "b", "argv": ["b", "{prompt}"]},
        ],
    )
    root, work = tmp_path / "ws", tmp_path / "ws" / "wt"
    a, b = cfg.levels
    box = for_call(cfg, a, workdir=work, engine_root=root, evidence_dir=root / "ev", readable=[])
    assert box is not None and box.allow_hosts == ("pypi.org:443", "api.a.com:443")
    assert Path.home().joinpath(".a").resolve() in box.writable and (root / "ev").resolve() in box.writable
    assert root.resolve() in box.hide and Path.home().joinpath("secret-dir").resolve() in box.hide
    assert Path.home().joinpath(".ssh").resolve() in box.hide
    assert for_call(cfg, b, workdir=work, engine_root=root, evidence_dir=root / "ev", readable=[]) is None
    assert for_checks(cfg, workdir=work, engine_root=root, steps_dir=root / "steps") is None  # checks: [agent]
    said = summary(cfg)
    assert said["levels"] == {"a": True, "b": False} and said["checks"] is False and "api.a.com:443" in said["said"]
    assert summary(AgentConfig()) is None


@needs_bwrap
def test_the_worktree_is_writable_the_workspace_hidden_and_git_works(tmp_path):
    root, work = repo_with_worktree(tmp_path)
    box = Sandbox.of(work, engine_root=root)
    r = run(
        box,
        f"""echo work > mine.txt && git status --short && git log --oneline | wc -l
        cat {root}/mp-engine.toml || echo toml-hidden
        git config --get remote.origin.url || echo no-remote-url
        echo x > {root}/planted.txt || echo workspace-read-only
        echo x > /usr/planted.txt || echo root-read-only
        echo x > /tmp/scratch && cat /tmp/scratch""",
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert "mine.txt" in lines and "toml-hidden" in lines and "no-remote-url" in lines, r.stdout + r.stderr
    assert "workspace-read-only" in lines and "root-read-only" in lines and lines[-1] == "x"
    assert (work / "mine.txt").read_text() == "work\n"  # the work is where the engine looks
    assert not (root / "planted.txt").exists() and not Path("/tmp/scratch").exists()  # /tmp was private
    assert "ghp_secret" not in r.stdout + r.stderr


@needs_bwrap
def test_nothing_the_call_started_outlives_it_and_it_sees_no_other_process(tmp_path):
    root, work = repo_with_worktree(tmp_path)
    token = f"outlive-{os.getpid()}-{time.monotonic_ns()}"
    r = run(
        Sandbox.of(work, engine_root=root),
        f"(setsid sh -c 'sleep 300 # {token}' &) ; kill -0 {os.getpid()} || echo no-engine",
    )
    assert "no-engine" in r.stdout
    left = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True).stdout.strip()
    assert left == "", "a process outlived its sandbox"


@needs_bwrap
def test_only_allowed_hosts_are_reachable_through_the_relay(tmp_path):
    root, work = repo_with_worktree(tmp_path)
    servers = []
    for _ in range(2):
        s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
    allowed, other = (s.server_address[1] for s in servers)
    fetch = """python3 -c 'import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1], timeout=5).status)'"""
    box = Sandbox.of(work, engine_root=root, allow_hosts=[f"127.0.0.1:{allowed}", f"localhost:{allowed}"])
    r = run(
        box,
        f"{fetch} http://127.0.0.1:{allowed}/ ; {fetch} http://localhost:{allowed}/ ; {fetch} http://127.0.0.1:{other}/ || echo refused",
    )
    assert r.stdout.split() == ["200", "200", "refused"], r.stdout + r.stderr
    closed = run(Sandbox.of(work, engine_root=root), f"{fetch} http://127.0.0.1:{allowed}/ || echo no-network")
    assert closed.stdout.split() == ["no-network"]
    for s in servers:
        s.shutdown()


def test_the_endpoint_a_level_is_configured_with_is_allowed_and_its_config_kept_read_only(tmp_path):
    """issue #44: what the caller found the CLI configured to reach (agent/call/endpoints.py)
    joins the level's hosts; the file that said so stays read-only although its directory
    is the CLI's writable state, so an agent cannot widen its own network."""
    cfg = AgentConfig(
        sandbox="os",
        levels=[
            {"name": "codex", "argv": ["codex", "-"], "stdin": True, "sandbox_allow_hosts": ["api.openai.com:443"]}
        ],
    )
    state = tmp_path / "codex-home"
    state.mkdir()
    (state / "config.toml").write_text("model_provider = 'gw'\n")
    level = cfg.levels[0].model_copy(update={"sandbox_rw": (str(state),)})
    box = for_call(
        cfg,
        level,
        workdir=tmp_path,
        engine_root=tmp_path / "ws",
        evidence_dir=tmp_path / "ev",
        readable=[],
        endpoints=["gw.example:8443"],
        protected=[state / "config.toml"],
    )
    assert box is not None and box.allow_hosts == ("api.openai.com:443", "gw.example:8443")
    assert box.record()["read_only"] == [str((state / "config.toml").resolve())]
    if problem() is None:
        r = run(box, f"echo x > {state}/session.json && echo wrote; echo y >> {state}/config.toml || echo kept")
        assert r.stdout.split() == ["wrote", "kept"], r.stdout + r.stderr
        assert (state / "config.toml").read_text() == "model_provider = 'gw'\n"


@needs_bwrap
def test_an_agent_finds_the_engines_git_identity_where_the_user_has_none(tmp_path, monkeypatch):
    """issue #44: a service user has no global git identity and the sandbox empties the
    repository's config, so aider wrote user.name into the read-only .git/config and crashed.
    Inside, git finds the identity the engine commits with (mp-engine's own here)."""
    root, work = repo_with_worktree(tmp_path)
    home = tmp_path / "service-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GIT_CONFIG_GLOBAL")
    box = Sandbox.of(work, engine_root=root)
    assert box.git_identity == ("mp-engine", "mp-engine@localhost")
    r = run(box, "git config user.name; git config user.email; git var GIT_AUTHOR_IDENT | cut -d'>' -f1")
    assert r.stdout.split("\n")[:3] == ["mp-engine", "mp-engine@localhost", "mp-engine <mp-engine@localhost"], r.stderr
    git(root, "config", "user.name", "Repo Owner")  # the repository's own, hidden inside: still the engine's
    assert Sandbox.of(work, engine_root=root).git_identity[0] == "Repo Owner"


def test_without_bubblewrap_it_says_how_to_get_it(monkeypatch):
    import mp_engine.execute.sandbox as sandbox

    sandbox.problem.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        why = sandbox.problem()
    finally:
        sandbox.problem.cache_clear()
    assert "not installed" in why and "apt install bubblewrap" in why and 'sandbox = "none"' in why


def test_require_refuses_only_a_configuration_that_asks_for_it(monkeypatch):
    import mp_engine.execute.sandbox as sandbox
    from mp_engine.core.errors import SandboxUnavailable

    monkeypatch.setattr(sandbox, "problem", lambda: "bubblewrap (`bwrap`) is not installed")
    sandbox.require(AgentConfig())  # off: nothing to refuse
    with pytest.raises(SandboxUnavailable, match='sandbox = "os" cannot work on this host'):
        sandbox.require(AgentConfig(levels=[{"name": "a", "argv": ["a", "{prompt}"], "sandbox": "os"}]))
