"""A metric check's verdict (issue #34): a check with `metric="NAME OP TARGET"` on its fence
passes when it exits 0 AND the number it printed last meets the target (inbox/metric.py
reads and compares); otherwise it fails with a diagnosis that names the value and the
target. The step's artifact keeps what it measured (`metric`), for the iteration record,
the residual and the certificate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mp_engine.inbox.metric import Metric, measure, read_value
from mp_engine.inbox.mpfile import Block
from mp_engine.record.diagnosis import Diagnosis


def judge(
    block: Block, exited_ok: bool, stdout: Path, d: Diagnosis | None, mp_id: str
) -> tuple[bool, Diagnosis | None, dict[str, Any]]:
    """(passed, its diagnosis, the artifact's extra fields) of a finished check."""
    if block.metric is None:
        return exited_ok, d, {}
    value = read_value(stdout)
    measured = {"metric": measure(block.metric, value)}
    if exited_ok and not measured["metric"]["met"]:
        return False, metric_unmet(block.step_id, block.index, block.line, block.metric, value, mp_id), measured
    return exited_ok, d, measured


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
