"""A check's verdict beyond its exit code. A check with `metric="NAME OP TARGET"` on its
fence (issue #34) passes when it exits 0 AND the number it printed last meets the target
(inbox/metric.py reads and compares); one with `stdout_contains="..."` or
`stdout_not_contains="..."` (issue #44, inbox/expect.py) when it exits 0 AND its output
says what it must and nothing it must not. Otherwise it fails with a diagnosis that names
the value and the target, or the text. The step's artifact keeps what was found
(`metric`, `expect`), for the iteration record, the residual and the certificate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mp_engine.inbox.metric import Metric, measure, read_value
from mp_engine.inbox.mpfile import Block
from mp_engine.record.diagnosis import Diagnosis


def judge(
    block: Block, exited_ok: bool, stdout: Path, d: Diagnosis | None, mp_id: str
) -> tuple[bool, Diagnosis | None, dict[str, Any]]:
    """(passed, its diagnosis, the artifact's extra fields) of a finished check: the first
    goal it misses decides the diagnosis, every goal's finding is kept."""
    measured: dict[str, Any] = {}
    ok = exited_ok
    if block.metric is not None:
        value = read_value(stdout)
        measured["metric"] = measure(block.metric, value)
        if ok and not measured["metric"]["met"]:
            ok, d = False, metric_unmet(block.step_id, block.index, block.line, block.metric, value, mp_id)
    if block.expect is not None:
        measured["expect"] = found = block.expect.verdict(stdout)
        if ok and not found["met"]:
            ok, d = False, output_unexpected(block, found, mp_id)
    return ok, d, measured


def output_unexpected(block: Block, found: dict[str, Any], mp_id: str) -> Diagnosis:
    """A check that exited 0 but whose output lacks a text it must contain, or has one it
    must not (inbox/expect.py)."""
    n, line = block.index, block.line
    if found["missing"]:
        text = found["missing"][0]
        summary = f"check {n}'s output lacks {text!r}"
        said = f"does not contain {text!r}, which its fence says it must (`stdout_contains`)"
    else:
        text = found["unwanted"][0]
        summary = f"check {n}'s output contains {text!r}"
        said = f"contains {text!r}, which its fence says it must not (`stdout_not_contains`)"
    return Diagnosis(
        "output_unexpected",
        summary,
        f"Check {n} (line {line}) exited 0, but its standard output {said}.",
        f"Make the work produce the output check {n} expects (its whole output is in the run archive), or "
        f"correct the text in the check's fence if it was set wrong, then resend with `Approves: {mp_id}`.",
        block.step_id,
        line,
    )


def metric_unmet(step_id: str, number: int, line: int, metric: Metric, value: float | None, mp_id: str) -> Diagnosis:
    """A metric check (inbox/metric.py) that exited 0 but did not reach its target."""
    if value is None:
        return Diagnosis(
            "metric_unmet",
            f"check {number} printed no {metric.name}",
            f"Check {number} (line {line}) exited 0, but the last line of its output is not a number, so "
            f"{metric.name} could not be compared with its target ({metric}).",
            f"Make check {number} print {metric.name} as a number on its last output line, then resend with "
            f"`Approves: {mp_id}`.",
            step_id,
            line,
        )
    return Diagnosis(
        "metric_unmet",
        f"{metric.name} {value:g}, target {metric.op} {metric.target:g}",
        f"Check {number} (line {line}) measured {metric.name} = {value:g}, which does not meet its target {metric}.",
        f"Bring {metric.name} to {metric.op} {metric.target:g} (it is {value:g}), or change the target in the "
        f"check's fence if it was set wrong, then resend with `Approves: {mp_id}`.",
        step_id,
        line,
    )
