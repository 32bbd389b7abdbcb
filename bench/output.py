"""12. A huge step output, git on: the daemon's peak memory, against a trivial MP's.

The real daemon with git on (a local bare remote) and no size cap (`max_file_bytes = 0`,
so the output is committed and therefore redacted first) runs an MP whose step prints N
MB of log lines with a GitHub token in the middle (so the redaction has to rewrite the
file, not only read it). The baseline is the daemon's peak RSS (VmHWM) after a warm-up of
two MPs that print one line; the figure is what the big MP adds to it. (git's own memory
while it hashes and compresses the blob is its process's, not the daemon's.) Target
(issue #20): under 20 MB for 200 MB; before the redaction streamed, the daemon read each
archive file whole (44 -> 454 MB).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PYTHON, Daemon, Row, Stat, StateWatcher, engine_env, mp_text, write_mp
from bench.gitcost import seed_remote

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def _wait_pushed(url: str, mp_id: str, timeout: float = 600) -> None:
    bare = url.removeprefix("file://")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = subprocess.run(
            ["git", "-C", bare, "show", "main:SYSTEM/RESULT_last.md"], capture_output=True, text=True
        )
        if f"MP: {mp_id}\n" in shown.stdout:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{mp_id}'s result was not pushed within {timeout} s")


def run(megabytes: int) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="mpe-bench-output-") as d:
        base = Path(d)
        env = engine_env(base, MP_ENGINE_ENGINE__SETTLE_SECONDS="0", MP_ENGINE_GIT__MAX_FILE_BYTES="0")
        url = seed_remote(base, "output")
        ws = base / "ws"
        subprocess.run(
            [PYTHON, "-m", "mp_engine", "init", "--remote", url, str(ws)], env=env, check=True, capture_output=True
        )
        half = megabytes * 1_000_000 // 2
        line = "2026-11-25 12:00:00 INFO item processed, all fine"
        big = f"(yes '{line}' || true) | head -c {half}; echo; echo 'leaked {TOKEN} here'\n" * 2
        daemon = Daemon(ws, env, base / "daemon.log")
        inbox = ws / "Claude_Inbox" / "incoming_microproject.txt"
        watcher = None
        try:
            daemon.wait_online()
            watcher = StateWatcher(ws / "SESSION_STATE.json")
            hwm = []
            for n, body in enumerate((f"echo '{line}'", f"echo '{line}'", big), 1):
                mark = watcher.mark()
                write_mp(inbox, mp_text(f"MP-12.{n}", body), "rename")
                watcher.wait(mark, lambda s, m=f"MP-12.{n}": s.get("last_completed") == m, timeout=600)
                _wait_pushed(url, f"MP-12.{n}")  # the result commit (and its redaction) follows the state
                hwm.append(_hwm_mb(daemon.pid))
        finally:
            if watcher is not None:
                watcher.close()
            daemon.stop()
        committed = subprocess.run(
            ["git", "-C", str(ws), "grep", "-c", "leaked \\[REDACTED\\] here", "HEAD", "--", "SYSTEM/runs"],
            capture_output=True,
            text=True,
        ).stdout
        if not committed.strip():
            raise RuntimeError("the token's line was not committed masked")
    added = hwm[2] - hwm[1]
    return [
        Row(
            f"12. peak RSS the daemon adds for a {megabytes} MB step output, git on",
            Stat(added, added, 1),
            "peak after trivial MPs",
            Stat(hwm[1], hwm[1], 1),
            "<= 20 MB",
            added <= 20,
            "MB",
        )
    ]


if __name__ == "__main__":  # pragma: no cover
    print(run(int(os.environ.get("MEGABYTES", "200"))))
