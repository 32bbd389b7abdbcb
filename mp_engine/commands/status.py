"""Status: what the engine is doing, assembled from the workspace (never from memory).

`status_report` is the data of `mp-engine status --json`; `render_status` lays it out for a
person; `status_line` is the one line systemd shows (`STATUS=` in supervisor.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mp_engine.agent.progress import pull_request_line, render_lines
from mp_engine.config import cache as config_cache
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.terminal import terminal_safe
from mp_engine.core.workspace import Workspace
from mp_engine.daemon.health import ago
from mp_engine.record.spend import line as budget_line
from mp_engine.views.status import (
    seconds,
    status_report,
)

if TYPE_CHECKING:
    pass

ANSI = {"red": 31, "green": 32, "yellow": 33, "cyan": 36, "white": 37}  # click.style's codes, without click
STATUS_COLOURS = {"ONLINE": "green", "RUNNING": "cyan", "ERROR": "red", "OFFLINE": "yellow"}


def fleet_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"  fleet:           Temporal {report['temporal']} (namespace {report['namespace']})"]
    if report.get("error"):
        return [*lines, f"    {report['error']}"]
    for queue, who in (report.get("queues") or {}).items():
        if who:
            lines.append(f"    queue {queue}: {len(who)} worker(s) polling: {', '.join(who)}")
        else:
            lines.append(
                f"    queue {queue}: no worker polling; its tasks wait until one starts "
                f"(`mp-engine worker --temporal {report['temporal']} --task-queue {queue}`)"
            )
    return lines


def render_status(report: dict[str, Any], *, color: bool = False) -> str:
    """The person's view; `color` (a TTY) colours the state, the halt and the last error.
    Long because it is the screen's layout, line by line, in the order a person reads it."""

    def paint(text: str, fg: str, bold: bool = False) -> str:
        if not color:
            return text
        return f"\x1b[{ANSI[fg]}m" + (f"\x1b[1m{text}" if bold else text) + "\x1b[0m"

    s = report["state"]
    halted = bool(report.get("halt"))
    state_word = paint(s["status"], STATUS_COLOURS.get(s["status"], "white"), bold=True)
    lines = [
        f"mp-engine workspace {report['root']}",
        f"  status:          {state_word}" + (paint("  (halted)", "red", bold=True) if halted else ""),
    ]
    d = report.get("daemon") or {}
    if d.get("down"):
        lines[1] = f"  status:          {paint('OFFLINE', 'yellow', bold=True)} ({d['down']})"
        lines.append(f"  daemon:          {paint('DOWN', 'red', bold=True)}")
    elif d.get("alive"):
        lines.append(f"  daemon:          running (pid {d.get('pid', '?')}, started {d.get('started_at', '?')})")
        if d.get("config_changed"):
            lines.append(f"  config:          {paint(d['config_changed'], 'yellow')}")
    else:
        lines.append("  daemon:          not running")
    if report.get("summary"):
        lines.append(f"  doing:           {report['summary']}")
    current = s["current"]
    st = report.get("step") or {}
    if st:
        current += f", {st['label']} ({st['id']})"
        if "elapsed" in st:
            current += f", running {seconds(st['elapsed'])}, {seconds(st['time_left'])} left before its timeout"
    lines += [
        f"  current:         {current}",
        f"  last completed:  {s['last_completed'] or '-'}",
        f"  last updated:    {s['last_updated']}",
    ]
    if s.get("last_result"):
        r = report.get("last_mp") or s["last_result"]
        colour = "green" if r["status"] in ("ONLINE", "COMPLETED") else "red"
        extra = f", {seconds(r['duration'])}" if r.get("duration") is not None else ""
        extra += f", certificate {r['certificate']}" if r.get("certificate") else ""
        extra += f", {r['ago']}" if r.get("ago") else ""
        title = f" {r['title']}" if r.get("title") else ""
        lines.append(
            f"  last result:     {r['mp_id']}{title} {paint(r['status'], colour, bold=True)}{extra} "
            f"(run {r['run_id']}, SYSTEM/RESULT_last.md)"
        )
        if r.get("pull_request", {}).get("number"):
            lines.append(f"  pull request:    {pull_request_line(r['pull_request'])}")
    for w in report.get("for_review") or []:
        bound = f" of {w['review_rounds_max']}" if w.get("review_rounds_max") is not None else ""
        lines.append(
            f"  for review:      {w['mp_id']} #{w['number']} {w['url']} (CI {w['ci']}; review rounds "
            f"{w['review_rounds']}{bound}; a reviewer's comment resumes run {w['run_id']})"
        )
    if st.get("output_tail"):
        lines.append("  output:          " + "\n                   ".join(st["output_tail"]))
    if s.get("run_id"):
        lines.append(f"  open run:        {s['run_id']}")
    if report.get("agent") or s.get("waiting"):
        lines += render_lines(report.get("agent"), s.get("waiting"))
    if report.get("halt"):
        h = report["halt"]
        lines.append(f"  halted on:       {paint(h['mp_id'], 'red', bold=True)}: {h['reason']} (since {h['since']})")
        if h.get("question"):  # a plan that waits for approval (issue #42)
            plan = h["question"].get("plan") or []
            lines.append(f"  plan to approve: {len(plan)} micro-task(s)")
            for t in plan:
                after = f" (after {', '.join(t['after'])})" if t.get("after") else ""
                lines.append(f"                   {t['mt_id']}: {t['title']}{after}")
            lines.append(f"  to continue:     {h['answer_with']}")
        else:
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
        from mp_engine.sync.push import refusal_notice  # loaded already: [git] is on

        if notice := refusal_notice(g.get("blocked")):
            line += f"  [{notice}]"
        elif g.get("blocked"):
            line += f"  [blocked: {g['blocked'].get('kind')} at {str(g['blocked'].get('remote'))[:12]}]"
        if g.get("error"):
            line += f"  [{g['error']}]"
        lines.append(line)
    if report.get("last_sync"):
        lines.append(f"  last sync:       {report['last_sync']['ago']}")
    if report.get("fleet"):
        lines += fleet_lines(report["fleet"])
    if report.get("lock_holder"):
        o = report["lock_holder"]
        lines.append(
            f"  lock held by:    pid {o.get('pid')} on {o.get('host')} for {o.get('purpose')} since {o.get('since')}"
        )
    if report.get("last_error"):
        e = report["last_error"]
        lines.append(f"  last error:      {paint(e['event'], 'red')} {ago(e['ts'])}: {e['message'][:300]}")
    if report.get("budget"):
        lines.append(f"  budget:          {budget_line(report['budget'])}")
    if report.get("stop_file"):
        lines.append(f"  stop file:       {paint(report['stop_file'], 'yellow')}")
    if report.get("config_error"):
        lines.append(f"  config error:    {paint(report['config_error'], 'red')}")
    return "\n".join(lines)


def status(root: Path, as_json: bool, echo: Callable[[str], None], color: bool) -> ExitCode:
    ws = Workspace.at(root)
    ws.check()
    config, config_error = config_cache.read(ws.root, ws.local_dir)
    report = status_report(ws, config)
    if config_error:
        report["config_error"] = f"{config_error} (status shows the state with the default settings)"
    echo(json.dumps(report, indent=2) if as_json else render_status(terminal_safe(report), color=color))
    return ExitCode.OK
