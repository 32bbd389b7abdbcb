"""The agent's part of the result: sections of RESULT_last.md (`Outcome.extra["sections"]`).

The certificate, each micro-task's iterations and levels, the residual history and links
to the evidence, all relative to the workspace root.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.certificate import Certificate
from mp_engine.agent.decompose import Plan
from mp_engine.agent.loopstate import LoopState


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def sections(
    c: Certificate,
    state: LoopState | None,
    plan: Plan,
    run_rel: str,
    pauses: list[dict[str, Any]],
    distilled: list[str] | None = None,
    commits: dict[str, str] | None = None,
) -> list[dict[str, str]]:
    lines = [f"- Certificate: **{c.type}** ({c.reason})", f"- Why: {c.detail}"]
    if c.mt:
        lines.append(f"- Ended on: {c.mt}, residual {c.residual if c.residual is not None else '-'}")
    if c.best:
        b = c.best
        lines.append(
            f"- Best iteration: {b['mt']} iteration {b['iteration']} at level {b['level']}, residual {b['residual']}"
            + (f" (failing: {', '.join(b['failing'])})" if b.get("failing") else "")
            + f" — `{run_rel}/{b['evidence']}/`"
        )
    if state is not None:
        lines.append(f"- Iterations: {state.total}, escalations: {state.escalations}, drop-backs: {state.drop_backs}")
    for p in pauses:
        lines.append(
            f"- Paused at {p['at']}: {p['kind']} ({p['reason']})"
            + (f", resumed after {p['resume_at']}" if p.get("resume_at") else "")
        )
    out = [{"title": "Halting certificate", "body": "\n".join(lines)}]
    if state is None:
        return out
    rows = [
        "| MT | Instruction | Status | Iterations | Levels | Commit | Last evidence |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in state.tasks:
        evidence = f"`{run_rel}/{t.records[-1]['evidence']}/`" if t.records else "-"
        commit = (commits or {}).get(t.mt_id)
        rows.append(
            f"| {t.mt_id} | {_cell(t.title)} | {t.status}{f' ({_cell(t.note)})' if t.note else ''} | {t.iterations} | "
            f"{', '.join(map(str, t.levels)) or '-'} | {f'`{commit[:12]}`' if commit else '-'} | {evidence} |"
        )
    out.append({"title": "Micro-tasks", "body": "\n".join(rows)})
    if state.history:
        hist = ["| MT | Iteration | Level | Residual |", "|---|---|---|---|"]
        hist += [f"| {h['mt']} | {h['iteration']} | {h['level']} | {h['residual']} |" for h in state.history]
        out.append({"title": "Residual history", "body": "\n".join(hist)})
    links = [
        f"- Progress artifact: `{run_rel}/agent/progress.json`",
        f"- Learnings: `{run_rel}/agent/learnings.md`",
        f"- Certificate: `{run_rel}/agent/certificate.json`",
        f"- Per iteration (prompt, output, claims, checks, diff, SHA-256 manifest): `{run_rel}/agent/<MT>/iter-<NNN>/`",
    ]
    links += [f"- Distillation candidate: `{d}`" for d in distilled or []]
    out.append({"title": "Evidence", "body": "\n".join(links)})
    return out
