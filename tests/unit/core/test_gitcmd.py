"""The one git runner: evidence in its errors, unreachable remotes told apart, timeouts."""

from __future__ import annotations

import pytest

from mp_engine.core.errors import RemoteUnreachable
from mp_engine.core.gitcmd import TIMED_OUT, GitFailed, git, noninteractive_env


def test_a_failure_carries_the_command_exit_code_and_stderr(tmp_path):
    with pytest.raises(GitFailed) as e:
        git(tmp_path, "rev-parse", "--verify", "nope")
    r = e.value.result
    assert r.args == ("rev-parse", "--verify", "nope") and r.code == 128
    assert "git rev-parse --verify nope" in str(e.value) and "exit 128" in str(e.value) and r.err


def test_an_unreachable_remote_is_its_own_error(tmp_path):
    git(tmp_path, "init", "-q")
    with pytest.raises(RemoteUnreachable, match="could not reach the remote"):
        git(tmp_path, "ls-remote", str(tmp_path / "no-such-remote.git"))


def test_check_false_returns_the_result(tmp_path):
    r = git(tmp_path, "rev-parse", "--is-inside-work-tree", check=False)
    assert not r.ok and r.code != 0


def test_a_timeout_kills_git_and_what_it_started(tmp_path):
    git(tmp_path, "init", "-q")
    # An alias that starts a child holding git's pipes, as ssh or a credential helper does.
    r = git(tmp_path, "-c", "alias.slow=!sleep 30", "slow", check=False, timeout=0.5)
    assert r.code == TIMED_OUT and "timed out after 0.5 s" in r.err
    # Checked, a timeout reads like an unreachable remote: the engine keeps its commits and
    # tries again at the next poll rather than halting.
    with pytest.raises(RemoteUnreachable, match="timed out"):
        git(tmp_path, "-c", "alias.slow=!sleep 30", "slow", timeout=0.5)


def test_input_reaches_git(tmp_path):
    git(tmp_path, "init", "-q")
    oid = git(tmp_path, "hash-object", "-w", "--stdin", input="hello\n").out.strip()
    assert git(tmp_path, "cat-file", "blob", oid, text=False).out == b"hello\n"


def test_the_environment_never_prompts():
    env = noninteractive_env({"GIT_SSH_COMMAND": "ssh -i key"})
    assert env["GIT_TERMINAL_PROMPT"] == "0" and "BatchMode=yes" in env["GIT_SSH_COMMAND"]
    assert env["GIT_SSH_COMMAND"].startswith("ssh -i key")


def test_ssh_connections_are_shared_through_a_private_directory_unless_the_user_chose():
    import os
    import stat

    from mp_engine.core.gitcmd import ssh_control_dir

    ssh = noninteractive_env({"GIT_SSH_COMMAND": "ssh -i key"})["GIT_SSH_COMMAND"]
    control = ssh_control_dir()
    assert control is not None and f"ControlPath={control}/%C" in ssh and "ControlMaster=auto" in ssh
    st = os.lstat(control)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert len(f"{control}/{'x' * 40}") < 100  # a unix socket path must stay short
    own = noninteractive_env({"GIT_SSH_COMMAND": "ssh -o ControlMaster=no"})["GIT_SSH_COMMAND"]
    assert own.count("ControlMaster") == 1 and "ControlPath" not in own


def test_a_control_directory_someone_else_could_write_is_not_used(monkeypatch, tmp_path):
    import tempfile

    from mp_engine.core.gitcmd import ssh_control_dir

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / f"mpe-ssh-{__import__('os').getuid()}").mkdir(mode=0o777)
    (tmp_path / f"mpe-ssh-{__import__('os').getuid()}").chmod(0o777)
    assert ssh_control_dir() is None
    assert "ControlPath" not in noninteractive_env({})["GIT_SSH_COMMAND"]


def _repo(tmp_path):
    import subprocess

    root = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "a.txt").write_text("a\n")
    return root


def test_a_changed_git_config_stops_the_engine_s_git_before_it_runs_anything(tmp_path):
    """Issue #20: a step's `git config filter.x.clean` (code on `git add`) or `git remote
    set-url` (results sent elsewhere) never reaches the engine's own git."""
    import subprocess

    from mp_engine.core.errors import GitConfigChanged
    from mp_engine.core.gitcmd import accept_config, config_change, protect_config

    root, copy = _repo(tmp_path), tmp_path / "accepted"
    assert protect_config(root, copy) is None and copy.exists()  # accepted as it is, the first time
    git(root, "remote", "add", "origin", "file:///right")  # the engine's own change...
    accept_config(root)  # ...is accepted
    marker = tmp_path / "filter-ran"
    (root / ".gitattributes").write_text("* filter=evil\n")
    # What a step does, with its own git (not the engine's runner):
    subprocess.run(["git", "-C", str(root), "config", "filter.evil.clean", f"touch {marker}; cat"], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "set-url", "origin", "file:///elsewhere"], check=True)
    with pytest.raises(GitConfigChanged, match="not by the engine") as raised:
        git(root, "add", "-A")
    assert '+clean = "touch' in str(raised.value) and "-url = file:///right" in str(raised.value)
    assert "+url = file:///elsewhere" in str(raised.value) and not marker.exists()
    with pytest.raises(GitConfigChanged):  # in a directory below it too (the agent's worktrees)
        git(root / "sub" if (root / "sub").mkdir() is None else root, "status", check=False)
    # Restored: git runs again.
    (root / ".git" / "config").write_bytes(copy.read_bytes())
    assert config_change(root) is None and git(root, "status", "--porcelain").ok


def test_a_repository_nobody_guards_is_left_alone(tmp_path):
    import subprocess

    root = _repo(tmp_path)
    subprocess.run(["git", "-C", str(root), "config", "core.pager", "less"], check=True)
    assert git(root, "status", "--porcelain").ok
