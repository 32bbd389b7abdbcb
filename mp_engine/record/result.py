"""Results: the `Outcome` of a run and its rendering to `SYSTEM/RESULT_last.md`.

The outcome is stored in the run ledger before anything is rendered, so a crash between
"the MP ended" and "the result is written" re-renders the same result on restart. The
Markdown opens with `Key: value` lines an orchestrator can parse without a Markdown parser
(see docs/PROTOCOL.md); `result.json` in the run archive holds the same data as JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mp_engine import __version__
from mp_engine.atomic import atomic_write, make_durable
from mp_engine.record.archive import RunArchive
from mp_engine.record.diagnosis import Diagnosis
from mp_engine.workspace import Workspace

COMPLETED = "COMPLETED"
ERROR = "ERROR"


@dataclass
class StepReport:
    step_id: str
    kind: str  # command | file | check
    what: str
    line: int | None = None
    status: str = "not run"  # ok | failed | not run
    exit_code: int | None = None
    duration: float | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_ref: str | None = None
    stderr_ref: str | None = None
    note: str | None = None
    attempts: int = 0


@dataclass
class Outcome:
    status: str  # COMPLETED | ERROR
    mp_id: str
    title: str
    run_id: str
    mp_sha256: str
    started_at: str
    finished_at: str
    duration: float = 0.0
    executor: str = "shell"
    steps: list[StepReport] = field(default_factory=list)
    checks: list[StepReport] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    error_output: str = ""
    error_output_ref: str | None = None
    notes: list[str] = field(default_factory=list)
    halt_token: str | None = None  # what `Approves:` must name to lift the halt
    extra: dict[str, Any] = field(default_factory=dict)  # executor-specific sections

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["diagnosis"] = self.diagnosis.to_dict() if self.diagnosis else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        data = dict(data)
        data["steps"] = [StepReport(**s) for s in data.get("steps", [])]
        data["checks"] = [StepReport(**s) for s in data.get("checks", [])]
        data["diagnosis"] = Diagnosis.from_dict(data["diagnosis"]) if data.get("diagnosis") else None
        return cls(**data)

    @property
    def commit_summary(self) -> str:
        """`MP-1.4: COMPLETED` or `MP-1.4: ERROR (timeout in step 2)`."""
        if self.status == COMPLETED or self.diagnosis is None:
            return f"{self.mp_id}: {self.status}"
        return f"{self.mp_id}: {self.status} ({self.diagnosis.summary})"


def read_capped(path: Path, cap: int) -> tuple[str, int]:
    """Text of the file at `path` cut to about `cap` bytes (head and tail kept), and the
    number of bytes omitted from the middle. Reads only what it shows."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "", 0
    with open(path, "rb") as f:
        if size <= cap:
            return f.read().decode("utf-8", errors="replace"), 0
        head = f.read(cap // 2)
        f.seek(size - (cap - cap // 2))
        tail = f.read()
    omitted = size - len(head) - len(tail)
    text = head.decode("utf-8", errors="replace") + f"\n[... {omitted} bytes omitted ...]\n"
    return text + tail.decode("utf-8", errors="replace"), omitted


def fenced(text: str, info: str = "text") -> str:
    """`text` in a code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def _fmt_seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def _render_report(r: StepReport, run_rel: str) -> list[str]:
    bits = [r.status]
    if r.exit_code is not None:
        bits.append(f"exit {r.exit_code}")
    if r.duration is not None:
        bits.append(_fmt_seconds(r.duration))
    line = f", line {r.line}" if r.line else ""
    out = [f"### {r.step_id}: {r.what}", "", f"- Result: {', '.join(bits)}{line}"]
    if r.attempts > 1:
        out.append(f"- Attempts: {r.attempts}")
    if r.note:
        out.append(f"- Note: {r.note}")
    for name, text, ref in (("stdout", r.stdout, r.stdout_ref), ("stderr", r.stderr, r.stderr_ref)):
        if text:
            where = f" (full: `{run_rel}/{ref}`)" if ref else ""
            out += ["", f"{name}{where}:", "", fenced(text)]
    out.append("")
    return out


def render_markdown(o: Outcome, ws: Workspace) -> str:
    run_rel = ws.rel(ws.runs_dir / o.run_id)
    lines = [
        f"# Result of {o.mp_id}" + (f": {o.title}" if o.title else ""),
        "",
        f"MP: {o.mp_id}",
        f"Status: {o.status}",
        f"Title: {o.title}",
        f"Run: {o.run_id}",
        f"Archive: {run_rel}/",
        f"MP-SHA256: {o.mp_sha256}",
        f"Executor: {o.executor}",
        f"Started: {o.started_at}",
        f"Finished: {o.finished_at}",
        f"Duration: {o.duration:.2f} s",
        f"Engine: mp-engine {__version__}",
    ]
    if o.extra.get("certificate"):  # the agent executor's halting certificate (docs/AGENT.md)
        lines.append(f"Certificate: {o.extra['certificate']['type']}")
    if o.diagnosis:
        lines += [f"Error-Kind: {o.diagnosis.kind}", f"Failed-At: {o.diagnosis.step_id or '-'}"]
    if o.halt_token:
        lines.append(f"Approve-With: Approves: {o.halt_token}")
    lines.append("")
    if o.diagnosis:
        d = o.diagnosis
        lines += [
            "## Error",
            "",
            f"- Kind: `{d.kind}`",
            f"- Where: {d.step_id or 'before any step ran'}" + (f" (line {d.line})" if d.line else ""),
            f"- Diagnosis: {d.diagnosis}",
            f"- Proposed fix: {d.fix}",
            "",
        ]
        if o.error_output:
            where = f" (full: `{run_rel}/{o.error_output_ref}`)" if o.error_output_ref else ""
            lines += [f"### Full error output{where}", "", fenced(o.error_output), ""]
        lines += [
            "## Halted",
            "",
            f"The engine is halted and takes no new MP until one arrives whose header says "
            f"`Approves: {o.halt_token}`, or until `mp-engine approve` is run on the engine host.",
            "",
        ]
    for section in o.extra.get("sections", []):
        lines += [f"## {section['title']}", "", section["body"].rstrip("\n"), ""]
    if o.steps:
        lines += ["## Steps", ""]
        for r in o.steps:
            lines += _render_report(r, run_rel)
    if o.checks:
        passed = sum(1 for c in o.checks if c.status == "ok")
        lines += ["## Validation", "", f"{passed} of {len(o.checks)} checks passed.", ""]
        for r in o.checks:
            lines += _render_report(r, run_rel)
    if o.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in o.notes] + [""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_result(ws: Workspace, run: RunArchive, outcome: Outcome, redact=lambda s: s) -> str:
    """Write the result into the archive and to SYSTEM/RESULT_last.md; return the text."""
    text = redact(render_markdown(outcome, ws))
    # Three atomic replaces, then one round of fsyncs: half the cost of three durable writes.
    atomic_write(
        run.result_json, redact(json.dumps(outcome.to_dict(), indent=2, ensure_ascii=False)) + "\n", durable=False
    )
    atomic_write(run.result_md, text, durable=False)
    atomic_write(ws.result_file, text, durable=False)
    make_durable(run.result_json, run.result_md, ws.result_file)
    return text
