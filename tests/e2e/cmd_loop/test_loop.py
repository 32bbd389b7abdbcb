"""`mp-engine loop` (issue #34) as a real process with a fake agent CLI: through a pipe
(plain lines) and in a pseudo-terminal (the live table); the run archived like any
other, nothing pushed, the exit code `once`'s."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time

from tests.agentutil import configure, level
from tests.e2e.cli import MP_ENGINE, mpe
from tests.gitutil import git

GOAL = 'Write "hello" to `out/a.txt`.'
CHECK = "grep -qx hello out/a.txt"


def test_through_a_pipe_it_prints_plain_lines_and_archives_the_run(ws):
    configure(ws, [level("good", "good.py")])
    r = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("[00:00] MP-") and lines[0].endswith(f"{GOAL}: dropped")
    body = "\n".join(lines)
    assert "micro-task(s): MT-001" in body and "MT-001 iteration 1, level 0 (good): started" in body
    assert "MT-001 iteration 1: checks passed (call ok)" in body and "MT-001 completed" in body
    assert "agent loop ended: certificate EXACT (all_checks_passed)" in body
    assert lines[-1].startswith("completed MP-")  # once's summary line
    mp_id = lines[-1].split()[1]
    (run,) = ws.runs_dir.glob(f"*{mp_id}*")
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "COMPLETED" and "Executor: agent" in (run / "incoming_microproject.txt").read_text()
    assert (ws.root / "out/a.txt").read_text() == "hello\n" and not ws.inbox_file.exists()
    assert "\x1b[" not in r.stdout  # no escape sequences through a pipe
    assert git(ws.root, "remote") == ""  # nothing to push to, and nothing tried


def test_a_failing_goal_exits_1_and_a_halt_or_an_occupied_inbox_is_refused(ws):
    configure(ws, [level("wrong", "wrong.py")], max_iterations=2)
    r = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert r.returncode == 1 and "\nerror MP-" in r.stdout  # once's summary, then the result's why
    assert "MT-001 iteration 2: residual 1" in r.stdout
    halted = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))  # the failure halted the engine
    assert halted.returncode == 3 and halted.stdout.startswith("halted on MP-") and "mp-engine approve" in halted.stdout
    assert not ws.inbox_file.exists()  # nothing written: it would only wait there
    assert mpe("approve", "--root", str(ws.root)).returncode == 0
    ws.inbox_file.write_text("# MP-1.1\n\n```bash\ntrue\n```\n")
    busy = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert busy.returncode == 2 and "already holds an MP" in busy.stderr
    assert ws.inbox_file.read_text().startswith("# MP-1.1")  # untouched


def test_in_a_terminal_it_draws_the_live_table(ws):
    configure(ws, [level("good", "good.py", "--sleep", "1")])
    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen(
        [MP_ENGINE, "loop", GOAL, "--check", CHECK, "--root", str(ws.root)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed: the process is done
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=30) == 0, out.decode(errors="replace")
    text = out.decode(errors="replace")
    assert "\x1b[" in text  # redrawn in place
    for cell in ("task", "status", "level", "iteration", "residual", "MT-001", "completed", "good"):
        assert cell in text, cell
    assert "running" in text  # seen while the agent worked (it takes a second)


def test_a_failure_prints_the_diagnosis_and_the_fix_its_result_gives(ws):
    # issue #44: the loop ended on once's one summary line; the why was in SYSTEM/RESULT_last.md.
    configure(ws, [level("wrong", "wrong.py")], max_iterations=1)
    r = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert doc["diagnosis"]["text"] and doc["fix"]
    said = r.stdout[r.stdout.rindex("\nerror MP-") :]
    assert f"\n  {doc['diagnosis']['text']}\n  fix: {doc['fix']}\n" in said, said
    assert said.endswith("  the whole result: SYSTEM/RESULT_last.md\n")


def test_a_chain_that_cannot_be_called_is_refused_before_anything_is_written(ws):
    # issue #44: the loop wrote and started the MP, which then failed and halted the engine.
    configure(ws, [level("good", "good.py"), {"name": "cloud", "argv": ["no-such-agent-cli", "-p"], "stdin": True}])
    r = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert r.returncode == 2 and "not on PATH: cloud: no-such-agent-cli" in r.stderr, r.stdout + r.stderr
    assert "Nothing was written" in r.stderr and "mp-engine doctor" in r.stderr
    configure(ws, [])
    none = mpe("loop", GOAL, "--check", CHECK, "--root", str(ws.root))
    assert none.returncode == 2 and "mp-engine init --agent NAME" in none.stderr, none.stdout + none.stderr
    assert not ws.inbox_file.exists() and not [d for d in ws.runs_dir.iterdir() if d.is_dir()]
    assert json.loads(ws.state_file.read_text()).get("halt") is None


def test_max_iterations_bounds_this_goal_within_the_operator_s_ceiling(ws):
    # issue #44: Loopr's `loop --max-iterations N`, written as the MP's `Max-Iterations:` header.
    configure(ws, [level("wrong", "wrong.py")], max_iterations=5, ceilings=["max_iterations"])
    above = mpe("loop", GOAL, "--check", CHECK, "--max-iterations", "6", "--root", str(ws.root))
    assert above.returncode == 2 and "above the ceiling" in above.stderr and "at most 5" in above.stderr
    assert not ws.inbox_file.exists() and not [d for d in ws.runs_dir.iterdir() if d.is_dir()]
    r = mpe("loop", GOAL, "--check", CHECK, "--max-iterations", "1", "--root", str(ws.root))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "MT-001 iteration 1: residual 1" in r.stdout and "MT-001 iteration 2" not in r.stdout
    (run,) = [d for d in ws.runs_dir.iterdir() if d.is_dir()]
    assert "\nMax-Iterations: 1\n" in (run / "incoming_microproject.txt").read_text()
    assert "All 1 iterations" in json.loads((ws.system_dir / "RESULT_last.json").read_text())["diagnosis"]["text"]
