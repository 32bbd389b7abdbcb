"""`mp-engine doctor` on real workspaces and real git repositories: the ok and the fail paths."""

from __future__ import annotations

import json
import os

from mp_engine.cli.main import main
from mp_engine.commands.doctor.check import FAIL, OK, WARN
from mp_engine.commands.doctor.host import mount_type
from mp_engine.commands.doctor.run import run_checks
from tests.conftest import dead_pid
from tests.gitutil import engine_workspace, make_remote


def by_name(root) -> dict[str, object]:
    return {c.name: c for c in run_checks(root)}


def doctor(capsys, root) -> tuple[int, str]:
    capsys.readouterr()  # drop what the set-up logged
    rc = main(["doctor", "--root", str(root)])
    return rc, capsys.readouterr().out


def test_a_healthy_git_workspace_passes_every_check(tmp_path, capsys):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare))
    rc, out = doctor(capsys, ws.root)
    assert rc == 0, out
    lines = out.splitlines()
    assert lines[-1].startswith("21 checks: 0 failed")
    assert len(lines) == 22 and all(line.startswith(("[ok  ]", "[warn]")) for line in lines[:-1])
    checks = by_name(ws.root)
    assert checks["git remote"].level == OK and "answers without a prompt" in checks["git remote"].message
    assert checks["git branch"].level == OK and "which the remote has" in checks["git branch"].message
    assert checks["git identity"].level == OK and "tests@mp-engine.invalid" in checks["git identity"].message
    assert checks["state"].level == OK and checks["workspace"].level == OK
    assert checks["git config"].level == OK and "next start" in checks["git config"].message


def test_doctor_fails_when_git_config_was_changed_under_the_engine(tmp_path, capsys):
    import subprocess

    from mp_engine.core.gitcmd import protect_config
    from mp_engine.core.workspace import GIT_CONFIG_COPY

    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare))
    protect_config(ws.root, ws.local_dir / GIT_CONFIG_COPY)  # what the engine does when it starts
    subprocess.run(["git", "-C", str(ws.root), "config", "core.sshCommand", "touch /tmp/x; ssh"], check=True)
    check = by_name(ws.root)["git config"]
    assert check.level == FAIL and "+sshCommand" in check.message and "restore the accepted copy" in check.fix


def test_an_unreachable_remote_fails_with_the_command_to_try(tmp_path, capsys):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare))
    bare.rename(tmp_path / "gone.git")
    rc, out = doctor(capsys, ws.root)
    assert rc == 1
    line = next(line for line in out.splitlines() if "git remote" in line)
    assert line.startswith("[FAIL] git remote: `git ls-remote origin` failed (exit 128)")
    assert "fix: check the URL" in line and "GIT_TERMINAL_PROMPT=0" in line


def test_wrong_branch_and_missing_identity(tmp_path, monkeypatch):
    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare))
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    os.system(f"git -C {ws.root} checkout -q -b elsewhere")
    checks = by_name(ws.root)
    assert checks["git branch"].level == FAIL and "not main" in checks["git branch"].message
    assert checks["git branch"].fix == f"git -C {ws.root} checkout main"
    assert checks["git identity"].level == WARN and "mp-engine@localhost" in checks["git identity"].message


def test_signature_settings_must_be_coherent(tmp_path):
    bare = make_remote(tmp_path)
    inside = engine_workspace(tmp_path, str(bare), require_signed=True, allowed_signers="signers")
    (inside.root / "signers").write_text("me@example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG\n")
    check = by_name(inside.root)["signatures"]
    assert check.level == FAIL and "inside the workspace" in check.message

    outside = tmp_path / "allowed_signers"
    outside.write_text("me@example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG\n")
    good = engine_workspace(tmp_path, str(bare), name="good", require_signed=True, allowed_signers=str(outside))
    assert by_name(good.root)["signatures"].level == OK

    missing = engine_workspace(
        tmp_path, str(bare), name="missing", require_signed=True, allowed_signers=str(tmp_path / "nope")
    )
    check = by_name(missing.root)["signatures"]
    assert check.level == FAIL and "does not exist" in check.message

    # A platform key named by fingerprint, but no key file holds it: the fix says what to do.
    other = "0123456789ABCDEF0123456789ABCDEF01234567"
    platform = engine_workspace(
        tmp_path, str(bare), name="platform", require_signed=True, platform_signers=[other], allowed_authors=["o@x"]
    )
    check = by_name(platform.root)["signatures"]
    assert check.level == FAIL and f"no key with the fingerprint of {other}" in check.message
    github = engine_workspace(
        tmp_path, str(bare), name="github", require_signed=True, platform_signers=["github"], allowed_authors=["o@x"]
    )
    assert by_name(github.root)["signatures"].level == OK  # GitHub's key ships with mp-engine


def test_agent_cli_versions_are_compared_with_the_ones_the_conformance_suite_passed_on(ws, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, says in (
        ("claude", "2.1.197 (Claude Code)"),
        ("codex", "codex-cli 0.169.0"),
        ("ollama", "ollama version is 0.5.7"),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\necho '{says}'\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    two = (
        '[[agent.levels]]\nname = "claude"\nargv = ["claude", "-p"]\nstdin = true\n'
        '[[agent.levels]]\nname = "codex"\nargv = ["codex", "exec", "-"]\nstdin = true\n'
    )
    ws.config_file.write_text(two)
    assert by_name(ws.root)["agent chain"].level == OK
    ws.config_file.write_text(two + '[[agent.levels]]\nname = "ollama"\nargv = ["ollama", "run", "m"]\nstdin = true\n')
    check = by_name(ws.root)["agent chain"]
    assert check.level == WARN and "ollama: ollama 0.5.7 (not yet conformance-tested)" in check.message
    (bin_dir / "codex").write_text("#!/bin/sh\necho 'codex-cli 0.170.0'\n")
    check = by_name(ws.root)["agent chain"]
    assert "codex: codex 0.170.0 (the conformance suite passed on 0.169.0)" in check.message


def test_agent_commands_must_be_on_path(ws):
    ws.config_file.write_text(
        '[[agent.levels]]\nname = "local"\nargv = ["no-such-agent-cli", "{prompt}"]\n'
        '[[agent.levels]]\nname = "shell"\nargv = ["sh", "-c", "{prompt}"]\n'
    )
    check = by_name(ws.root)["agent chain"]
    assert check.level == FAIL and check.message == "not found on PATH: local: no-such-agent-cli"


def test_an_invalid_state_file_fails(ws, capsys):
    ws.state_file.write_text("{not json")
    rc, out = doctor(capsys, ws.root)
    assert rc == 1 and "[FAIL] state:" in out and "not valid JSON" in out


def test_stale_running_state_and_stale_lock_owner_are_reported(ws):
    state = json.loads(ws.state_file.read_text())
    pid = dead_pid()
    import socket

    state.update(status="RUNNING", run_id="20260101T000000Z-MP-1", daemon={"pid": pid, "host": socket.gethostname()})
    ws.state_file.write_text(json.dumps(state))
    check = by_name(ws.root)["lock"]
    assert check.level == WARN and f"engine pid {pid} is gone" in check.message and "resumes" in check.fix
    ws.local_dir.mkdir(parents=True, exist_ok=True)
    (ws.local_dir / "lock.owner").write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "purpose": "tick"}))
    check = by_name(ws.root)["lock"]
    assert check.level == WARN and f"names pid {pid}" in check.message


def test_not_a_workspace_fails_with_the_init_command(tmp_path, capsys):
    rc, out = doctor(capsys, tmp_path / "nothing-here")
    assert rc == 1 and "[FAIL] workspace" in out and "mp-engine init" in out


def test_network_filesystems_are_found_in_the_mount_table(tmp_path, ws):
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw 0 0\n"
        "server:/export /srv/share nfs4 rw 0 0\n"
        "me@host:/x /home/me/remote\\040dir fuse.sshfs rw 0 0\n"
    )
    assert mount_type(tmp_path, mounts) == "ext4"
    assert mount_type(tmp_path.parent / "srv", mounts) == "ext4"
    from pathlib import Path

    assert mount_type(Path("/srv/share/ws"), mounts) == "nfs4"
    assert mount_type(Path("/srv/shared"), mounts) == "ext4"  # a prefix of the name is not the mount
    assert mount_type(Path("/home/me/remote dir/ws"), mounts) == "fuse.sshfs"
    # And on this machine's real mount table the workspace is on a local file system.
    check = by_name(ws.root)["filesystem"]
    assert check.level == OK and "(local)" in check.message


def test_the_process_guards_say_what_is_lost_without_prctl(ws, monkeypatch):
    from mp_engine.commands.doctor.host import process_guards
    from mp_engine.config.load import load_config
    from mp_engine.core import pids

    config = load_config(ws.root)
    assert process_guards(ws, config).level == OK  # the tests run on Linux
    monkeypatch.setattr(pids, "LINUX", False)
    check = process_guards(ws, config)
    assert check.level == WARN and "setsid" in check.message and check.fix
    assert pids.become_subreaper() is False and pids.make_undumpable() is False


def test_the_fleet_check_is_ok_when_off_and_fails_with_the_fix_when_temporal_does_not_answer(tmp_path, capsys):
    from tests.agentutil import configure, level
    from tests.fleetutil import add_fleet, free_port

    bare = make_remote(tmp_path)
    ws = engine_workspace(tmp_path, str(bare))
    configure(ws, [level("fast", "good.py")])
    assert by_name(ws.root)["fleet"].level == OK and "off" in by_name(ws.root)["fleet"].message
    address = f"127.0.0.1:{free_port()}"
    add_fleet(ws, address, "q", connect_timeout=1)
    check = by_name(ws.root)["fleet"]
    assert check.level == FAIL and f"Temporal at {address} is unreachable" in check.message
    assert "temporal server start-dev" in check.fix
    assert "run on the fleet's workers" in by_name(ws.root)["agent chain"].message
