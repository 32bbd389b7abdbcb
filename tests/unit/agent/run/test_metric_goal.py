"""Metric goals in the agent loop (issue #34), through `Engine.tick()` with a fake agent:
a shrinking distance to the target is progress; a stalled one trips the breaker even
though the agent changes files every time; the certificate names the metric, the target
and the best value reached."""

from __future__ import annotations

import json

from mp_engine.record import memory
from tests.agentutil import level, only_run, records
from tests.conftest import drop, result_field

MP = """# MP-6.1 Coverage
Executor: agent

Raise the coverage written to `coverage.txt` to 0.90.

## Validate

```bash metric="coverage >= 0.90"
cat coverage.txt
```
"""


def test_an_agent_closing_in_on_the_target_converges(engine_for, ws):
    engine = engine_for([level("measurer", "measurer.py", "--values", "0.70,0.80,0.92")], max_no_progress=1)
    drop(ws, MP)
    assert engine.tick().action == "completed", ws.result_file.read_text()
    recs = records(only_run(ws))
    assert [r["residual"] for r in recs] == [0.181818, 0.1, 0]  # d/(1+d), d = 0.2/0.9 then 0.1/0.9
    assert [r["metrics"][0]["value"] for r in recs] == [0.7, 0.8, 0.92]
    cert = json.loads((only_run(ws).dir / "agent/certificate.json").read_text())
    assert cert["type"] == "EXACT"
    assert [(m["name"], m["op"], m["target"], m["value"], m["met"]) for m in cert["metrics"]] == [
        ("coverage", ">=", 0.9, 0.92, True)
    ]
    assert "- Metric: coverage >= 0.9 (check-001): best 0.92, MT-001 iteration 3, met" in ws.result_file.read_text()
    # What SYSTEM/memory.md keeps of it: where the metric started, and what it took.
    assert "`cat coverage.txt` (check-001, " in memory.read(ws)
    assert "failed first at coverage 0.7 (target >= 0.9); passed after 3 iteration(s)" in memory.read(ws)


def test_a_stalled_metric_trips_no_progress_though_files_change(engine_for, ws):
    engine = engine_for([level("measurer", "measurer.py", "--values", "0.70,0.75,0.75,0.75")], max_no_progress=2)
    drop(ws, MP)
    assert engine.tick().action == "error"
    recs = records(only_run(ws))
    assert len(recs) == 4  # 0.70; 0.75 (closer: progress); 0.75, 0.75 (no progress twice)
    cert = json.loads((only_run(ws).dir / "agent/certificate.json").read_text())
    assert cert["reason"] == "breaker:no_progress"
    assert cert["metrics"][0]["value"] == 0.75 and not cert["metrics"][0]["met"]
    text = ws.result_file.read_text()
    assert "coverage >= 0.9 (check-001): best 0.75, MT-001 iteration 4, not met" in text
    assert result_field(ws, "Status") == "ERROR"
