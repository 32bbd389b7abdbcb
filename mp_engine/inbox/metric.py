"""Metric goals (issue #34): a Validate check that measures instead of passing or failing.

    ```bash metric="coverage >= 0.90"
    pytest --cov=src -q | awk '/^TOTAL/ {print $NF / 100}'
    ```

The check passes when it exits 0 and the last non-empty line of its standard output is a
number meeting the target (`>=`, `>`, `<=`, `<` or `==`; a trailing `%` is allowed and
ignored, `ms` and `s` too). Otherwise its distance to the target is what is left to do:
relative to the target (|target - value| / |target|, or the plain difference when the
target is 0), squashed into [0, 1) as d / (1 + d) so that it adds to the task's residual
beside whole failing checks (each 1). A check that exits non-zero or prints no number is
1, as any failing check. A shrinking distance is progress for the breakers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

METRIC_ATTR = re.compile(r"""\bmetric\s*=\s*(?:"([^"]*)"|'([^']*)')""")
SPEC = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(>=|<=|==|>|<)\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(%|ms|s)?\s*$")
NUMBER = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?:%|ms|s)?\s*$")
TAIL_BYTES = 4096
SYNTAX = 'metric="NAME OP TARGET", e.g. metric="coverage >= 0.90" or metric="p95_ms < 200" (OP: >=, >, <=, <, ==)'


@dataclass(frozen=True)
class Metric:
    name: str
    op: str
    target: float

    def __str__(self) -> str:
        return f"{self.name} {self.op} {self.target:g}"

    def met(self, value: float) -> bool:
        t = self.target
        return {">=": value >= t, ">": value > t, "<=": value <= t, "<": value < t, "==": math.isclose(value, t)}[
            self.op
        ]

    def distance(self, value: float | None) -> float:
        """What `value` leaves to do, in [0, 1]: 0 when met, 1 when there is no value."""
        if value is None:
            return 1.0
        if self.met(value):
            return 0.0
        d = abs(self.target - value) / (abs(self.target) or 1.0)
        return round(d / (1.0 + d), 6) or 1e-6  # unmet is never 0


def parse(info: str) -> Metric | None:
    """The metric of a fence's info string after its language (`metric="..."`), or None.
    Raises ValueError, saying what is wrong, for a malformed one."""
    m = METRIC_ATTR.search(info)
    if m is None:
        if re.search(r"\bmetric\s*=", info):
            raise ValueError(f"the metric attribute is not quoted; write {SYNTAX}")
        return None
    spec = SPEC.match(m.group(1) if m.group(1) is not None else m.group(2))
    if spec is None:
        raise ValueError(f"metric={m.group(0).split('=', 1)[1]} is not NAME OP NUMBER; write {SYNTAX}")
    return Metric(spec.group(1), spec.group(2), float(spec.group(3)))


def value_of(output: str) -> float | None:
    """The number on the last non-empty line of `output`, or None."""
    last = next((ln for ln in reversed(output.splitlines()) if ln.strip()), "")
    m = NUMBER.match(last)
    return float(m.group(1)) if m else None


def read_value(stdout: Path) -> float | None:
    """The number a metric check printed last (the end of its stdout file)."""
    try:
        with open(stdout, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return value_of(f.read().decode("utf-8", "replace"))
    except FileNotFoundError:
        return None


def measure(metric: Metric, value: float | None) -> dict[str, object]:
    """What a metric check measured, as its step artifact and the iteration record keep it."""
    return {
        "name": metric.name,
        "op": metric.op,
        "target": metric.target,
        "value": value,
        "met": value is not None and metric.met(value),
        "distance": metric.distance(value),
    }
