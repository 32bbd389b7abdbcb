"""The report: counts, the rate and its interval, time and cost, the overheads, and the paired
comparison, from results rows; rendered as Markdown and as a page whose texts are escaped."""

from __future__ import annotations

import json

import pytest

from mp_engine.eval import markdown, page
from mp_engine.eval.layout import EvalDir
from mp_engine.eval.report import build, read, summary_lines, write
from mp_engine.eval.tasks import Task, TaskSet

MANIFEST = {"task_set": "s", "engine": "0.2.0", "order": ["cheap", "strong"], "configs": {"cheap": "x", "strong": "y"}}


def row(config, iid, verdict, cost=0.1, run=10.0, certificate="EXACT"):
    ran = {
        "run_id": "r",
        "certificate": certificate,
        "iterations": 2,
        "levels": ["l0"],
        "tokens": {"input": 10, "output": 2, "cache_read": 0, "cache_write": 0},
        "cost_usd": cost,
        "time": {"run": run, "engine": 0.5, "prepare": 0.2, "judge": 1.0, "probe": 1.0},
    }
    return {"config": config, "instance_id": iid, "verdict": verdict, "why": "", **(ran if certificate else {})}


TASKS = [f"t{i}" for i in range(8)]
ROWS = [
    *(row("cheap", t, "resolved" if i < 2 else "unresolved") for i, t in enumerate(TASKS[:7])),
    *(row("strong", t, "resolved" if i < 7 else "unresolved", cost=1.0, run=20.0) for i, t in enumerate(TASKS[:7])),
    row("cheap", "t7", "env_error", certificate=None),
    row("strong", "t7", "env_error", certificate=None),
]


def test_the_rate_counts_only_what_an_agent_could_be_judged_on():
    doc = build(MANIFEST, TASKS, ROWS)
    cheap, strong = doc["configs"]
    assert (cheap["resolved"], cheap["judged"], cheap["env_error"], cheap["pending"]) == (2, 7, 1, 0)
    assert cheap["resolve_rate"] == pytest.approx(2 / 7, abs=1e-4) and cheap["ci95"][0] < 2 / 7 < cheap["ci95"][1]
    assert cheap["exact_unresolved"] == 5  # the engine's checks passed, the hidden tests did not
    assert strong["cost_usd"] == 7.0 and strong["cost_per_resolved"] == 1.0 and strong["time_p50"] == 20.0
    assert strong["engine_share"] == pytest.approx(0.025) and strong["harness_seconds_p50"] == 2.2


def test_configurations_are_paired_per_task_and_tested_against_chance():
    (k,) = build(MANIFEST, TASKS, ROWS)["comparisons"]
    assert (k["a"], k["b"], k["paired"], k["both"], k["only_a"], k["only_b"], k["neither"]) == (
        "cheap",
        "strong",
        7,
        2,
        0,
        5,
        0,
    )
    assert k["p_value"] == 0.0625 and not k["significant"]  # 5 to 0 is not yet more than chance
    more = ROWS + [row(c, "t8", v) for c, v in (("cheap", "unresolved"), ("strong", "resolved"))]
    (k,) = build(MANIFEST, [*TASKS, "t8"], more)["comparisons"]
    assert k["only_b"] == 6 and k["significant"] and k["difference"] == pytest.approx(6 / 8)


def test_a_pair_not_judged_yet_is_pending_and_left_out_of_the_pairing():
    doc = build(MANIFEST, TASKS, [r for r in ROWS if not (r["config"] == "strong" and r["instance_id"] == "t0")])
    assert doc["configs"][1]["pending"] == 1 and doc["comparisons"][0]["paired"] == 6
    assert doc["per_task"][0]["strong"] is None


def test_markdown_and_the_page_show_it_and_escape_what_a_task_says():
    hostile = ROWS + [{**row("cheap", "<script>x</script>|", "unresolved")}]
    doc = build(MANIFEST, [*TASKS, "<script>x</script>|"], hostile)
    md = markdown.render(doc)
    assert "| cheap | 2/8 |" in md and "| strong vs cheap | 7 | 2 | 0 | 5 | 0 |" in md
    assert "<script>x</script>\\|" in md  # a pipe does not break the table
    html = page.render(doc)
    assert "<script>" not in html and "&lt;script&gt;" in html and "<svg" in html
    lines = summary_lines(doc)
    assert lines[0].startswith("cheap: resolved 2/8 (25%") and "1 env_error" in lines[0]
    assert lines[-1].startswith("strong vs cheap: 5 resolved only by strong, 0 only by cheap of 7 paired")


def test_write_reads_the_eval_directory_and_read_takes_only_a_report(tmp_path):
    out = EvalDir(tmp_path)
    TaskSet("s", [Task(t, "r", "u", "c", "p", "P", ("f",)) for t in TASKS]).write(out.tasks)
    out.manifest.write_text(json.dumps(MANIFEST))
    out.results.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    doc = write(out)
    assert read(out.report("json")) == json.loads(out.report("json").read_text()) == doc
    assert out.report("md").read_text().startswith("# Eval: s") and out.report("html").exists()
    assert read(out.manifest) is None and read(tmp_path / "none.json") is None
