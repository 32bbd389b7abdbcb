"""The dashboard's evals (issue #43): the reports `mp-engine eval` wrote in the workspace,
listed and shown, with what came from a task set escaped."""

from __future__ import annotations

import json

from mp_engine.eval.report import build
from mp_engine.web.evals import report, reports
from tests.unit.web.test_app import app_for

MANIFEST = {
    "task_set": "demo",
    "engine": "0.2.0",
    "order": ["cheap", "strong"],
    "configs": {"cheap": "x", "strong": "y"},
}


def row(config, iid, verdict):
    ran = {"run_id": "r", "certificate": "EXACT", "iterations": 1, "levels": ["l"], "cost_usd": 0.1}
    ran |= {"tokens": {"input": 1, "output": 1, "cache_read": 0, "cache_write": 0}, "time": {"run": 3.0, "engine": 0.2}}
    return {"config": config, "instance_id": iid, "verdict": verdict, "why": "", **ran}


def write_report(ws, name, tasks, rows):
    path = ws.evals_dir / name / "report.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(build(MANIFEST, tasks, rows)))


def test_the_reports_are_listed_and_one_is_shown_with_its_bars(ws):
    tasks = ["t1", "<b>t2</b>"]
    write_report(
        ws,
        "demo",
        tasks,
        [row("cheap", "t1", "resolved"), row("strong", "t1", "resolved"), row("strong", "<b>t2</b>", "unresolved")],
    )
    (ws.evals_dir / "broken").mkdir()
    (ws.evals_dir / "broken" / "report.json").write_text("{not json")
    (listed,) = reports(ws)
    assert listed["name"] == "demo" and [c["resolved"] for c in listed["configs"]] == [1, 1]
    doc = report(ws, "demo")
    assert [b["label"] for b in doc["bars"]] == ["100% (1/1)", "50% (1/2)"] and doc["bars"][1]["w"] == 180.0
    assert report(ws, "../demo") is None and report(ws, "broken") is None and report(ws, "none") is None
    _, client = app_for(ws)
    page = client.get("/evals")
    assert page.status_code == 200 and 'href="/evals/demo"' in page.text and "cheap 1/1" in page.text
    one = client.get("/evals/demo")
    assert one.status_code == 200 and "&lt;b&gt;t2&lt;/b&gt;" in one.text and "<b>t2</b>" not in one.text
    assert "strong vs cheap" in one.text and "not judged yet" in one.text
    missing = client.get("/evals/nothing")
    assert missing.status_code == 404 and "No eval nothing" in missing.text


def test_without_an_eval_the_page_says_how_to_run_one(ws):
    _, client = app_for(ws)
    assert "mp-engine eval --demo" in client.get("/evals").text
