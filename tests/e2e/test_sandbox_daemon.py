"""The agent sandbox in the real daemon (issue #33): a fake agent that, inside its
sandboxed call, tries to write outside its worktree, read a key in ~/.ssh, the engine's
mp-engine.toml and another run's files, signal the engine, leave a process behind and
reach a loopback port that is not allowed. Every attempt fails and shows in the evidence;
its honest work and the checks succeed; the engine and its files are untouched."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from mp_engine.execute.sandbox import problem
from tests.agentutil import ONE, configure, level, only_run, records
from tests.conftest import drop, read_state, result_field, wait_for
from tests.netutil import TcpServer

pytestmark = [
    pytest.mark.daemon,
    pytest.mark.skipif(problem() is not None, reason=f"the sandbox cannot run here: {problem()}"),
]

SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not-for-agents"


def test_a_sandboxed_agent_cannot_reach_what_it_tries_and_still_does_its_work(ws, daemon_factory, tmp_path):
    home = os.environ["HOME"]
    os.makedirs(f"{home}/.ssh", exist_ok=True)
    with open(f"{home}/.ssh/id_ed25519", "w") as f:
        f.write(SECRET)
    other = ws.root / "SYSTEM" / ".engine" / "work" / "an-earlier-run"
    other.mkdir(parents=True)
    (other / "notes.txt").write_text("another run's work\n")
    server = TcpServer()  # a loopback port no sandbox allows
    token = f"linger-{os.getpid()}-{tmp_path.name}"
    planted = f"/var/tmp/mp-engine-planted-{token}"
    configure(
        ws,
        [
            level(
                "prowler",
                "prowler.py",
                *(
                    "--read",
                    f"{home}/.ssh/id_ed25519",
                    "--read",
                    str(ws.config_file),
                    "--read",
                    str(other / "notes.txt"),
                ),
                *("--write", str(ws.root / "planted.txt"), "--write", planted),
                *("--linger", token, "--connect", f"127.0.0.1:{server.port}"),
            )
        ],
        sandbox="os",
    )
    toml_before = ws.config_file.read_bytes()
    d = daemon_factory(ws.root).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE\n" + d.output())
    drop(ws, ONE.replace("Keep it short.", f"Keep it short. Signal pid {d.pid}."))
    wait_for(lambda: result_field(ws, "Status") is not None, timeout=60, what=lambda: "a result\n" + d.output())
    assert result_field(ws, "Status") == "COMPLETED", ws.result_file.read_text() + d.output()

    run = only_run(ws)
    evidence = run.dir / records(run)[0]["evidence"]
    attempts = {
        a["attempt"]: a
        for a in map(
            json.loads, filter(lambda s: s.startswith("{"), (evidence / "stdout.txt").read_text().splitlines())
        )
    }
    assert len(attempts) == 8, attempts
    assert [a for a in attempts.values() if a["ok"] and not a["attempt"].startswith("linger")] == []
    assert "No such process" in attempts[f"signal {d.pid}"]["detail"]
    assert "Read-only file system" in attempts[f"write {planted}"]["detail"]
    assert "Connection refused" in attempts[f"connect 127.0.0.1:{server.port}"]["detail"]
    assert SECRET not in (evidence / "stdout.txt").read_text() + (evidence / "stderr.txt").read_text()

    # The engine and its files are untouched; nothing was planted; nothing lingers.
    # The result is written before the state says ONLINE again (finalize's order): wait for it.
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what=lambda: "engine ONLINE after the MP\n" + d.output())
    assert d.proc.poll() is None
    assert ws.config_file.read_bytes() == toml_before
    assert not (ws.root / "planted.txt").exists() and not os.path.exists(planted)
    assert server.accepted == []
    left = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True)
    assert left.stdout.strip() == "", f"a process outlived the call: {left.stdout}"

    # The evidence and the result say the call was sandboxed, and how.
    rules = json.loads((evidence / "sandbox.json").read_text())
    assert rules["mechanism"] == "bubblewrap" and rules["network"] == "none" and str(ws.root) in rules["hidden"]
    result = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert result["sandbox"]["levels"] == {"prowler": True} and result["sandbox"]["checks"] is True
    assert "ran in the sandbox" in ws.result_file.read_text()
    server.close()
    d.signal(signal.SIGTERM)
    d.wait()


def test_the_engine_refuses_to_start_when_the_sandbox_cannot_work(ws, tmp_path):
    configure(ws, [level("a", "good.py")], sandbox="os")
    bin_dir = tmp_path / "bin"  # a PATH without bwrap
    bin_dir.mkdir()
    for tool in ("git", "sh", "python3"):
        found = subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip()
        (bin_dir / tool).symlink_to(found)
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "mp_engine", "once", "--root", str(ws.root)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bin_dir)},
        timeout=60,
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert 'sandbox = "os" cannot work on this host' in r.stderr and "apt install bubblewrap" in r.stderr
