"""`mp-engine doctor` in a real process: one line per check, exit 1 on a failure."""

from __future__ import annotations

import pytest

from tests.e2e.cli import mpe


def test_a_fresh_workspace_passes(ws):
    r = mpe("doctor", "--root", str(ws.root))
    assert r.returncode == 0, r.stdout
    lines = r.stdout.splitlines()
    assert lines[-1].startswith(f"{len(lines) - 1} checks: 0 failed")
    assert all(line.startswith(("[ok  ]", "[warn]")) for line in lines[:-1])


def test_a_damaged_state_file_fails_with_the_fix(ws):
    ws.state_file.write_text("{")
    r = mpe("doctor", "--root", str(ws.root))
    assert r.returncode == 1
    failed = [line for line in r.stdout.splitlines() if line.startswith("[FAIL]")]
    assert failed and "state:" in failed[0] and "-- fix: restore SESSION_STATE.json from git" in failed[0]


def test_a_public_mcp_server_without_a_trusted_proxy_is_a_warning(ws, tmp_path):
    """Issue #46: the real `mp-engine mcp --http` behind a public URL, seen by doctor."""
    pytest.importorskip("mcp")
    from tests.e2e.cmd_mcp.serverutil import McpServer

    server = McpServer(tmp_path, "file:///nowhere.git", 9443).start()
    try:
        warned = [line for line in mpe("doctor", "--root", str(ws.root)).stdout.splitlines() if "mcp server" in line]
        assert len(warned) == 1 and warned[0].startswith("[warn] mcp server:"), warned
        assert f"pid {server.proc.pid} serves https://mp.test:9443" in warned[0]
        assert "--trusted-proxy 127.0.0.1" in warned[0]
        server.stop()
        server.extra = ("--trusted-proxy", "127.0.0.1")
        server.start()
        # (other servers of this user on this host may still be named: not this one)
        fine = [line for line in mpe("doctor", "--root", str(ws.root)).stdout.splitlines() if "mcp server" in line]
        assert len(fine) == 1 and f"pid {server.proc.pid} " not in fine[0], fine
    finally:
        server.stop()
