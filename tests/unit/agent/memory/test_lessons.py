"""The repository's memory across agent MPs (issue #34), through `Engine.tick()` with fake
agent CLIs: a lesson of MP 1's correction is in MP 2's prompt, secrets never reach the
file, the agent's own words never become a lesson."""

from __future__ import annotations

import hashlib
import json

from mp_engine.agent.memory.lessons import of_run
from mp_engine.agent.state.model import TaskState
from mp_engine.config.load import load_config
from mp_engine.inbox.mpfile import parse
from mp_engine.pipeline.engine import Engine
from mp_engine.record import memory
from mp_engine.sync.redact import Redactor
from tests.agentutil import level, only_run, records
from tests.conftest import drop, result_field

TOKEN = "ghp_" + "A1b2C3d4" * 5  # a GitHub token's shape: masked before anything is written

FIRST = f"""# MP-5.1 Greeting
Executor: agent

Write "hello" to `out/a.txt`.

## Validate

```bash
grep -qx hello out/a.txt || {{ echo "AssertionError: out/a.txt must say hello (auth {TOKEN})"; exit 1; }}
```
"""

SECOND = """# MP-5.2 Farewell
Executor: agent

Write "bye" to `out/b.txt`.

## Validate

```bash
grep -qx bye out/b.txt
```
"""


def test_a_lesson_of_one_mps_correction_is_in_the_next_mps_prompt(engine_for, ws, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()  # second.py: wrong at its first iteration, right at its second
    engine_for([level("second", "second.py", "--gate", str(gate))])
    config = load_config(ws.root)
    engine = Engine(ws, config, redact=Redactor.from_config(config))  # as the daemon builds it
    engine.start(daemon=False)
    drop(ws, FIRST)
    assert engine.tick().action == "completed", ws.result_file.read_text()
    first = only_run(ws)
    remembered = memory.read(ws)
    assert "## MP-5.1 (" in remembered
    assert (
        '`grep -qx hello out/a.txt || { echo "AssertionError: out/a.txt must say hello ...` (check-001, ' in remembered
    )
    assert "failed first with `AssertionError: out/a.txt must say hello (auth [REDACTED])`" in remembered
    assert "passed after 2 iteration(s), at level second." in remembered
    assert TOKEN not in remembered and "first attempt" not in remembered  # never the agent's summary
    assert "## Lessons for SYSTEM/memory.md" in ws.result_file.read_text()
    assert not (first.dir / "agent/memory.md").exists()  # MP 1's prompts carried no memory

    drop(ws, SECOND)
    assert engine.tick().action == "completed", ws.result_file.read_text()
    (run_dir,) = [r for r in ws.runs_dir.glob("*MP-5.2*") if r.is_dir()]
    prompt = (run_dir / "agent/MT-001/iter-001/prompt.md").read_text()
    assert "## Memory of this repository" in prompt and "must say hello (auth [REDACTED])" in prompt
    assert prompt.index("## Memory of this repository") < prompt.index("## Your micro-task now")
    # The evidence: the snapshot the prompts carried, named with its digest in the result.
    kept = (run_dir / "agent/memory.md").read_bytes()
    assert kept.decode() == remembered
    carried = json.loads((ws.system_dir / "RESULT_last.json").read_text())
    assert json.dumps(carried).count(hashlib.sha256(kept).hexdigest()) == 1
    # MP 2's own correction is added after MP 1's (its prompts carried the memory before it).
    now = memory.read(ws)
    assert now.startswith(remembered) and "## MP-5.2 (" in now and "`grep -qx bye out/b.txt` (check-001" in now
    assert "failed first (exit 1)" in now  # a check that printed nothing: its exit code
    assert result_field(ws, "Status") == "COMPLETED"


def test_memory_off_writes_and_reads_nothing(engine_for, ws, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    memory.path_of(ws).write_text("# Memory\n\n- an old lesson\n")
    engine = engine_for([level("second", "second.py", "--gate", str(gate))], memory=False)
    drop(ws, FIRST)
    assert engine.tick().action == "completed"
    (rec, _) = records(only_run(ws))
    prompt = (only_run(ws).dir / rec["evidence"] / "prompt.md").read_text()
    assert "an old lesson" not in prompt
    assert memory.read(ws) == "# Memory\n\n- an old lesson\n"


def test_lessons_come_from_checks_that_failed_then_passed_and_from_answers(tmp_path):
    mp = parse(SECOND.encode())
    (tmp_path / "s1.stdout").write_text("collecting\nE   AssertionError: bye != by\n1 failed\n")
    (tmp_path / "s1.stderr").write_text("")
    failing = {"gate": False, "level": 0, "checks": [{"id": "check-001", "step": "s1", "ok": False, "exit_code": 1}]}
    passing = {"gate": True, "level": 1, "level_name": "big", "passed": ["check-001"], "checks": []}
    done = TaskState("MT-001", "bye", status="completed", iterations=2, records=[failing, passing])
    done.answers = [{"question": "Which greeting?", "answer": "Say bye."}]
    at_once = TaskState("MT-002", "x", status="completed", iterations=1, records=[passing])
    failed = TaskState("MT-003", "y", status="failed", iterations=1, records=[failing])
    assert of_run([done, at_once, failed], mp, tmp_path) == [
        "`grep -qx bye out/b.txt` (check-001, bye): failed first with `E AssertionError: bye != by`; "
        "passed after 2 iteration(s), at level big.",
        'Asked "Which greeting?"; a person answered: Say bye.',
    ]
