"""The daemon's secrets are out of a step's reach (issue #20, item 4): the attack the issue
describes, run for real. A step of a signed-in daemon looks for the daemon's secrets where
a same-user process can: the daemon's own /proc/<pid>/environ, and the environment of the
git processes the daemon starts while the step runs (the cancel watch reads the remote every
0.2 s). It finds neither (as root it can read the daemon's: root reads any process), and an
`env_allow`ed secret still reaches the step."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.conftest import read_state, wait_for
from tests.e2e.conftest import GIT_ENV
from tests.gitutil import clone, engine_workspace, git, make_remote, push_file, remote_file

pytestmark = pytest.mark.daemon

INBOX = "Claude_Inbox/incoming_microproject.txt"

# Runs as the step: reports what it could read, never a value (the result is pushed).
SPY = r"""
import os, sys, time
daemon = int(sys.argv[1])
try:
    open(f"/proc/{daemon}/environ", "rb").read()
    print("daemon environ: READABLE")
except OSError as e:
    print(f"daemon environ: unreadable ({type(e).__name__})")
print("allowed:", "present" if os.environ.get("DEMO_API_KEY") else "absent")
print("not allowed:", "present" if "OTHER_TOKEN" in os.environ else "absent")
seen, leaked, deadline = set(), set(), time.monotonic() + 30
while len(seen) < 3 and time.monotonic() < deadline:
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in seen:
            continue
        try:
            comm = open(f"/proc/{name}/comm").read().strip()
            env = open(f"/proc/{name}/environ", "rb").read()
        except OSError:
            continue
        if comm.startswith("git") and b"GIT_TERMINAL_PROMPT=0" in env:  # the engine's git
            seen.add(int(name))
            leaked |= {v for v in ("DEMO_API_KEY", "OTHER_TOKEN") if f"{v}=".encode() in env}
print(f"engine git processes read: {len(seen)}")
print("secrets in their environment:", ",".join(sorted(leaked)) or "none")
"""


def test_a_step_finds_no_secret_in_the_daemon_or_the_git_it_runs(tmp_path, daemon_factory):
    bare = make_remote(tmp_path)
    url = f"file://{bare}"
    ws = engine_workspace(tmp_path, url)
    config = ws.config_file.read_text()
    ws.config_file.write_text(config.replace("env_allow = []", 'env_allow = ["DEMO_API_KEY"]', 1))
    git(ws.root, "commit", "-qam", "allow DEMO_API_KEY to steps")
    git(ws.root, "push", "-q", "origin", "HEAD:main")
    secrets = {"DEMO_API_KEY": "sk-demo-0123456789abcdef", "OTHER_TOKEN": "tok-other-0123456789abcdef"}
    d = daemon_factory(ws.root, env={**GIT_ENV, **secrets}).start()
    wait_for(lambda: read_state(ws)["status"] == "ONLINE", what="engine ONLINE")
    hardened = [e for e in map(json.loads, ws.events_file.read_text().splitlines()) if e["event"] == "process_hardened"]
    assert hardened[-1]["secrets_held"] == ["DEMO_API_KEY", "OTHER_TOKEN"] and hardened[-1]["undumpable"]

    orch = clone(url, tmp_path / "orch")
    text = f"# MP-40.1 Look for the daemon's secrets\n\n```bash\n{sys.executable} - {d.pid} <<'EOF'\n{SPY}\nEOF\n```\n"
    push_file(orch, INBOX, text, "MP-40.1")

    def result() -> str:
        text = remote_file(bare, "SYSTEM/RESULT_last.md") or ""
        return text if "MP-40.1" in text else ""

    wait_for(result, timeout=60, what=f"MP-40.1's result; log:\n{d.output()[-3000:]}")
    text = result()
    assert "Status: COMPLETED" in text, text
    if os.geteuid() != 0:  # root reads every process (README, Security); test_pids proves it as `nobody`
        assert "daemon environ: unreadable (PermissionError)" in text
    assert "allowed: present" in text and "not allowed: absent" in text
    assert "engine git processes read: 0" not in text, "the step never saw the engine's git run"
    assert "secrets in their environment: none" in text, text
    assert not any(v in text for v in secrets.values())
