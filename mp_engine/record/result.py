"""The result file: an `Outcome` rendered to `SYSTEM/RESULT_last.md` and the run archive.

The Markdown opens with `Key: value` lines an orchestrator can parse without a Markdown parser
(see docs/PROTOCOL.md); `result.json` in the run archive is RESULT_last.json's document
(digest.py), the same result as JSON.
"""

from __future__ import annotations

import dataclasses
import json

from mp_engine import __version__
from mp_engine.core.atomic import atomic_link, atomic_write, fsync_dir, make_durable
from mp_engine.core.workspace import Workspace
from mp_engine.record.archive import RunArchive
from mp_engine.record.digest import LAST_JSON, PROTOCOL_VERSION, SPECIFICATION, document, read_result
from mp_engine.record.outcome import Outcome, StepReport, fenced

# RESULT_last.md travels with every result commit and is what an orchestrator (often a
# model) reads first: it is kept under this size; whole outputs stay in the run archive.
RESULT_MAX_BYTES = 64 * 1024


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
    """RESULT_last.md from an outcome. Long because it is the document's layout, section after
    section, read top to bottom like the file it writes."""
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
        f"Specification: {SPECIFICATION}",
        f"Protocol: {PROTOCOL_VERSION}",
    ]
    if o.extra.get("certificate"):  # the agent executor's halting certificate (docs/AGENT.md)
        lines.append(f"Certificate: {o.extra['certificate']['type']}")
    if o.diagnosis:
        lines += [f"Error-Kind: {o.diagnosis.kind}", f"Failed-At: {o.diagnosis.step_id or '-'}"]
    if o.halt_token:
        lines.append(f"Approve-With: Approves: {o.halt_token}")
    lines.append("")
    if o.notes:  # first: a block that was not executed must not hide at the end
        lines += ["## Notes", ""] + [f"- {n}" for n in o.notes] + [""]
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
        if o.halt_token:
            lines += [
                "## Halted",
                "",
                f"The engine is halted and takes no new MP until one arrives whose header says "
                f"`Approves: {o.halt_token}`, or until `mp-engine approve` is run on the engine host.",
                "",
            ]
        else:
            lines += [
                "## Not halted",
                "",
                "Nothing ran, so the engine did not halt: send the corrected MP (no `Approves:` needed).",
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
    return "\n".join(lines).rstrip("\n") + "\n"


def _cut(text: str, keep: int) -> str:
    """`text` cut to about `keep` characters, head and tail kept."""
    if len(text) <= keep:
        return text
    omitted = len(text) - keep
    note = f"\n[... {omitted} characters cut to keep the result under {RESULT_MAX_BYTES // 1024} KiB; see the archive ...]\n"
    return text[: keep // 2] + note + text[-(keep - keep // 2) :]


def _shrunk(o: Outcome, keep: int) -> Outcome:
    def report(r: StepReport) -> StepReport:
        return dataclasses.replace(r, stdout=_cut(r.stdout, keep), stderr=_cut(r.stderr, keep))

    return dataclasses.replace(
        o,
        steps=[report(r) for r in o.steps],
        checks=[report(r) for r in o.checks],
        error_output=_cut(o.error_output, keep * 2),
    )


def render_bounded(o: Outcome, ws: Workspace, cap: int = RESULT_MAX_BYTES) -> str:
    """The Markdown within `cap` bytes: each output is cut (head and tail, the archive path
    of the whole file stays in the text) until it fits; a result that still does not fit
    (thousands of steps) is cut as a whole, its `Key: value` lines first."""
    text = render_markdown(o, ws)
    keep = 8 * 1024
    while len(text.encode("utf-8")) > cap and keep >= 128:
        text = render_markdown(_shrunk(o, keep), ws)
        keep //= 2
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    tail = (
        f"\n\n[... cut at {cap // 1024} KiB; the whole result is in {ws.rel(ws.runs_dir / o.run_id)}/result.json ...]\n"
    )
    return data[: cap - len(tail.encode())].decode("utf-8", errors="ignore") + tail


def write_result(
    ws: Workspace, run: RunArchive, outcome: Outcome, redact=lambda s: s, *, last: bool = True, also=()
) -> str:
    """Write the result into the archive and (when `last`) to SYSTEM/RESULT_last.md; the
    files in `also` (written without fsync by the caller) are made durable in the same
    round of fsyncs."""
    text = redact(render_bounded(outcome, ws))
    # Three atomic replaces, then one round of fsyncs: half the cost of three durable writes.
    # The archive's result.json is RESULT_last.json's document (docs/PROTOCOL.md §7, §8);
    # the outcome itself, whole, is the ledger's (issue #44).
    doc = document(outcome, ws)
    atomic_write(run.result_json, redact(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n", durable=False)
    atomic_write(run.result_md, text, durable=False)
    written = [run.result_json, run.result_md]
    if last:
        # SYSTEM/RESULT_last.md and .json are the run's RESULT.md and result.json, hard
        # links: the same bytes, not written or fsynced twice (copies where links fail).
        for source, dest in ((run.result_md, ws.result_file), (run.result_json, ws.system_dir / LAST_JSON)):
            if not atomic_link(source, dest):
                atomic_write(dest, source.read_bytes(), durable=False)
                written.append(dest)
    make_durable(*written, *also)
    if last and all(p.parent != ws.system_dir for p in [*written, *also]):
        fsync_dir(ws.system_dir)  # the links' entries
    return text


def add_note(ws: Workspace, run: RunArchive, note: str, redact=lambda s: s) -> bool:
    """Add `note` to a written result (once): its archive copies and, when it is still the
    last result, RESULT_last.md. False when the run has no result."""
    written = read_result(run.dir)
    try:
        recorded = run.ledger().model.outcome
    except (OSError, ValueError):
        recorded = None
    if written is None or recorded is None:
        return False
    notes = list(written.get("notes") or [])
    if note in notes:
        return True
    outcome = Outcome.from_dict(recorded)
    outcome.notes = [*notes, note]  # the notes added before this one are the result's
    try:
        last = json.loads(ws.state_file.read_text(encoding="utf-8")).get("last_result", {}).get("run_id") == run.run_id
    except (OSError, ValueError, AttributeError):
        last = False
    write_result(ws, run, outcome, redact, last=last)
    return True
