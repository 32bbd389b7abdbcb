"""Pause points (issue #34), through `Engine.tick()` with fake agents: a task marked
`(pause)` stops the run before it starts, the result says what is done and what comes
next, and an answer resumes the same run on its branch; with parallel tasks, the others
go on first."""

from __future__ import annotations

import json

from mp_engine.inbox import answer
from tests.agentutil import level, only_run, records
from tests.conftest import drop, read_state, result_field
from tests.gitutil import git
from tests.unit.pipeline.test_answering import start

PAUSED = """# MP-8.1 Two steps, a look between
Executor: agent

1. Write "one" to `out/a.txt`.
2. (pause) Write "two" to `out/b.txt`.

## Validate

```bash
grep -qx one out/a.txt
```

```bash
# MT-002
grep -qx two out/b.txt
```
"""


def test_the_run_stops_before_the_marked_task_and_an_answer_resumes_it(ws, monkeypatch):
    engine = start(ws, monkeypatch, level("good", "good.py"))
    drop(ws, PAUSED)
    assert engine.tick().action == "error"
    run = only_run(ws)
    assert [r["mt"] for r in records(run)] == ["MT-001"]  # MT-002 never started
    assert read_state(ws)["halt"]["mp_id"] == "MP-8.1" and result_field(ws, "Status") == "ERROR"
    text = ws.result_file.read_text()
    assert 'Done: MT-001 (Write "one" to `out/a.txt`). Next: MT-002: Write "two" to `out/b.txt`.' in text
    assert "mp-engine answer MP-8.1" in text  # the fix: how to go on
    result = json.loads(run.result_json.read_text())
    assert result["answerable"]["mt"] == "MT-002"
    d = result["diagnosis"]
    assert d["kind"] == "agent_paused" and d["summary"] == "paused before MT-002, as the MP asks"
    assert git(ws.root, "show", "mp/MP-8.1:out/a.txt") == "one"  # the work so far, on its branch

    answer.write_host(ws, "MP-8.1", "Looks right; go on.")
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert only_run(ws).run_id == run.run_id  # the same run, on the same branch
    assert [r["mt"] for r in records(run)] == ["MT-001", "MT-002"]
    prompt = (run.dir / "agent/MT-002/iter-001/prompt.md").read_text()
    assert "Looks right; go on." in prompt  # the answer to the pause, in the task's prompt
    assert '2. Write "two" to `out/b.txt`.' in prompt and "2. (pause)" not in prompt  # a mark, not an instruction
    assert git(ws.root, "show", "mp/MP-8.1:out/b.txt") == "two"
    assert result_field(ws, "Status") == "COMPLETED" and read_state(ws)["halt"] is None


def test_parallel_tasks_that_do_not_need_the_paused_one_run_first(ws, monkeypatch):
    engine = start(ws, monkeypatch, level("good", "good.py"), max_parallel=2)
    drop(ws, PAUSED.replace("2. (pause) Write", "2. (pause) (after none) Write").replace("two steps", "x"))
    assert engine.tick().action == "error"
    run = only_run(ws)
    assert [r["mt"] for r in records(run) if "mt" in r] == ["MT-001"]
    assert "Paused before MT-002, as the MP marks it with (pause)." in ws.result_file.read_text()
    answer.write_host(ws, "MP-8.1", "go on")
    assert engine.tick().action == "completed", ws.result_file.read_text()
    assert git(ws.root, "show", "mp/MP-8.1:out/b.txt") == "two"
