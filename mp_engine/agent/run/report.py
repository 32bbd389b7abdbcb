"""The agent's part of the result: sections of RESULT_last.md (`Outcome.extra["sections"]`).

The certificate, each micro-task's iterations and levels, the residual history and links
to the evidence, all relative to the workspace root.
"""

from __future__ import annotations

from typing import Any

from mp_engine.agent.judge.certificate import Certificate, describe_metric
from mp_engine.agent.plan.decompose import Plan
from mp_engine.agent.state.model import RunState


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def plan_lines(state: RunState) -> list[str]:
    """The plan's story: who planned, each task's needs, re-plans and drift checks."""
    lines = []
    if state.campaign.planned:
        lines.append("- Planned by `[agent.planner]` (its answers: `agent/PLAN-<n>/`)")
        for t, ts in zip(state.plan.tasks, state.tasks, strict=True):
            after = ", ".join(state.tasks[i].mt_id for i in sorted(state.plan.needs(t.index))) or "none"
            files = f"; files: {', '.join(t.files)}" if t.files else ""
            route = f"; domain: {t.domain}" if t.domain else ""
            lines.append(f"  - {ts.mt_id} ({_cell(t.ref)}): after {after}{route}{files}")
    for r in state.campaign.replans:
        made = ", ".join(r.get("tasks") or []) or "(no plan yet)"
        on = f" on {r['mt']}" if r["mt"] else ""
        lines.append(f"- Re-plan {r['round']} ({r['cause']}{on}): {_cell(r['detail'])} New tasks: {made}")
    for d in state.campaign.drift_checks:
        verdict = f"; reflector: {d['reflector']} ({_cell(d['why'])})" if d["reflector"] else ""
        checks = f"{len(d['checks'])} check(s) re-run" + (
            f", regressed: {', '.join(d['regressed'])}" if d["regressed"] else ""
        )
        lines.append(f"- Drift check at {d['at']} %: {'DRIFT' if d['drift'] else 'no drift'}; {checks}{verdict}")
    return lines


def sections(
    c: Certificate,
    state: RunState | None,
    plan: Plan,
    run_rel: str,
    pauses: list[dict[str, Any]],
    distilled: list[str] | None = None,
    commits: dict[str, str] | None = None,
    memory: dict[str, Any] | None = None,
) -> list[dict[str, str]]:
    """The result's agent sections: the certificate, the plan, the tasks, the residuals. Long
    because it lays out the sections in the order the result shows them."""
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
    lines += [f"- Metric: {describe_metric(m)}" for m in c.metrics]
    if state is not None:
        lines.append(f"- Iterations: {state.total}, escalations: {state.escalations}, drop-backs: {state.drop_backs}")
        if state.usage.total["calls"]:
            lines.append(f"- Agent usage: {state.usage.line()}")
    for p in pauses:
        lines.append(
            f"- Paused at {p['at']}: {p['kind']} ({p['reason']})"
            + (f", resumed after {p['resume_at']}" if p.get("resume_at") else "")
        )
    out = [{"title": "Halting certificate", "body": "\n".join(lines)}]
    if state is None:
        return out
    # Tasks that ran at once (placement.py, Worktrees): when each ran, and beside which.
    timed = ["Started", "Ended", "Ran with"] if state.isolated else []
    fleet = ["Ran on"] if any(t.workers for t in state.tasks) else []  # the fleet's workers (docs/FLEET.md)
    head = ["MT", "Instruction", "Status", "Iterations", "Levels", "Commit", "Last evidence", *timed, *fleet]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in state.tasks:
        evidence = f"`{run_rel}/{t.records[-1]['evidence']}/`" if t.records else "-"
        commit = (commits or {}).get(t.mt_id)
        when = [t.started_at or "-", t.ended_at or "-", ", ".join(t.overlapped_with) or "-"] if timed else []
        when += [", ".join(dict.fromkeys(t.workers)) or "-"] if fleet else []
        rows.append(
            f"| {t.mt_id} | {_cell(t.title)} | {t.status}{f' ({_cell(t.note)})' if t.note else ''} | {t.iterations} | "
            f"{', '.join(map(str, t.levels)) or '-'} | {f'`{commit[:12]}`' if commit else '-'} | {evidence} |"
            + "".join(f" {w} |" for w in when)
        )
    out.append({"title": "Micro-tasks", "body": "\n".join(rows)})
    if state.campaign.planned or state.campaign.replans or state.campaign.drift_checks:
        out.append({"title": "Plan", "body": "\n".join(plan_lines(state))})
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
    if memory:  # lessons.carried: the SYSTEM/memory.md every prompt of the run carried
        links.append(f"- Memory the prompts carried: `{memory['path']}` (SHA-256 `{memory['sha256'][:12]}`)")
    out.append({"title": "Evidence", "body": "\n".join(links)})
    return out
