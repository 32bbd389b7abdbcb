"""Status: what the engine is doing, assembled from the workspace (never from memory)."""

from __future__ import annotations

from typing import Any

from mp_engine.config import Config
from mp_engine.errors import InvalidMPError
from mp_engine.events import EventLog
from mp_engine.inbox import EntryKind, Inbox
from mp_engine.lock import WorkspaceLock
from mp_engine.mpfile import parse
from mp_engine.state import StateStore
from mp_engine.workspace import Workspace


def status_report(ws: Workspace, config: Config) -> dict[str, Any]:
    """State, the pending MP, the halt and how to lift it, and who holds the lock."""
    state = StateStore(ws.state_file, EventLog(ws.events_file)).read()
    report: dict[str, Any] = {"root": str(ws.root), "state": state.to_json()}
    entry = Inbox(ws, config.engine.settle_seconds).lstat_entry()
    if entry is not None:
        pending: dict[str, Any] = {"path": ws.rel(entry.path), "kind": entry.kind.value, "bytes": entry.sig.size}
        if entry.kind is EntryKind.FILE and entry.sig.size <= config.engine.max_mp_bytes:
            try:
                mp = parse(entry.path.read_bytes(), max_bytes=config.engine.max_mp_bytes)
                pending.update(mp_id=mp.mp_id, title=mp.title, approves=mp.approves)
            except (InvalidMPError, OSError) as e:
                pending["invalid"] = str(e)
        report["pending"] = pending
    if state.halt is not None:
        halt = state.halt
        report["halt"] = {
            **halt.model_dump(),
            "lift_with": [f"an MP whose header has `Approves: {halt.mp_id}`", "`mp-engine approve` on this host"],
        }
        pending = report.get("pending")
        if pending and pending.get("approves") not in (halt.mp_id, halt.run_id):
            pending["held"] = f"waits: the engine is halted on {halt.mp_id} and this MP does not approve it"
    if state.run_id:  # a live agent run: MT, iteration, level, residual, budget (docs/AGENT.md)
        from mp_engine.agent.progress import load_report

        if (agent := load_report(ws.runs_dir / state.run_id)) is not None:
            report["agent"] = agent
    owner = WorkspaceLock(ws.lock_file, 1).owner()
    if owner:
        report["lock_holder"] = owner
    if config.git.enabled:
        from mp_engine.gitsync import GitSync

        report["git"] = GitSync(ws, config.git).report()
    return report


def render_status(report: dict[str, Any]) -> str:
    s = report["state"]
    lines = [
        f"mp-engine workspace {report['root']}",
        f"  status:          {s['status']}" + ("  (halted)" if report.get("halt") else ""),
        f"  current:         {s['current']}",
        f"  last completed:  {s['last_completed'] or '-'}",
        f"  last updated:    {s['last_updated']}",
    ]
    if s.get("last_result"):
        r = s["last_result"]
        lines.append(f"  last result:     {r['mp_id']} {r['status']} (run {r['run_id']}, SYSTEM/RESULT_last.md)")
    if s.get("run_id"):
        lines.append(f"  open run:        {s['run_id']}")
    if report.get("agent") or s.get("waiting"):
        from mp_engine.agent.progress import render_lines

        lines += render_lines(report.get("agent"), s.get("waiting"))
    if report.get("halt"):
        h = report["halt"]
        lines.append(f"  halted on:       {h['mp_id']}: {h['reason']} (since {h['since']})")
        lines.append(f"  to continue:     send {h['lift_with'][0]}, or run {h['lift_with'][1]}")
    p = report.get("pending")
    if p:
        what = p.get("mp_id") or p["kind"]
        extra = f"  [{p['held']}]" if p.get("held") else (f"  [invalid: {p['invalid']}]" if p.get("invalid") else "")
        lines.append(f"  inbox:           {what} ({p['bytes']} bytes){extra}")
    else:
        lines.append("  inbox:           empty")
    if report.get("git"):
        g = report["git"]
        line = f"  git:             {g['remote']} {g['branch']}, {g.get('unpushed', '?')} unpushed commit(s)"
        if g.get("blocked"):
            line += f"  [blocked: {g['blocked'].get('kind')} at {str(g['blocked'].get('remote'))[:12]}]"
        if g.get("error"):
            line += f"  [{g['error']}]"
        lines.append(line)
    if report.get("lock_holder"):
        o = report["lock_holder"]
        lines.append(
            f"  lock held by:    pid {o.get('pid')} on {o.get('host')} for {o.get('purpose')} since {o.get('since')}"
        )
    return "\n".join(lines)
