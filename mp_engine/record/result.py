"""The result file: an `Outcome` rendered to `SYSTEM/RESULT_last.md` and the run archive.

The Markdown opens with `Key: value` lines an orchestrator can parse without a Markdown parser
(see docs/PROTOCOL.md); `result.json` in the run archive holds the same data as JSON.
"""

from __future__ import annotations

import json

from mp_engine import __version__
from mp_engine.atomic import atomic_write, make_durable
from mp_engine.record.archive import RunArchive
from mp_engine.record.outcome import Outcome, StepReport, fenced
from mp_engine.workspace import Workspace


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
