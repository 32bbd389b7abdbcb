"""`mp-engine status --remote`: the orchestrator's side of the channel, from anywhere that
can reach the repository: the state the engine last pushed, the MP in the remote's
inbox, and whether the engine is up, stopped or silent (its heartbeat, sync/heartbeat.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mp_engine.client.channel import progress_line, state_at
from mp_engine.client.send import Sender
from mp_engine.core.errors import SyncError
from mp_engine.core.exitcodes import ExitCode
from mp_engine.core.workspace import SYSTEM_DIR
from mp_engine.inbox.header import header_summary
from mp_engine.record.digest import LAST_JSON
from mp_engine.sync.session import GitSession
from mp_engine.sync.signatures import INBOX_PATH

RESULT_JSON_PATH = f"{SYSTEM_DIR}/{LAST_JSON}"


def read_remote(sender: Sender) -> dict:
    """The remote's state and the engine's liveness (`status --remote`)."""
    s, tip = sender.at_tip()
    try:
        state = state_at(s, tip)
        pending = s.blob(tip, INBOX_PATH)
        engine = sender.liveness(s)
        report = {
            "repo": sender.repo_arg,
            "branch": sender.branch,
            "tip": tip,
            "state": state,
            "engine": engine,
            "inbox": header_summary(pending) if pending is not None else None,
            "progress": progress_line(state),
        }
        # A pull request (issue #41): the running MP's, as its heartbeat says, else the last result's.
        pr = engine.get("pull_request") or last_result(s, tip).get("pull_request")
        return {**report, "pull_request": pr} if pr else report
    finally:
        s.close()


def last_result(s: GitSession, tip: str) -> dict[str, Any]:
    """SYSTEM/RESULT_last.json at `tip` ({} when missing or unreadable)."""
    try:
        doc = json.loads(s.blob(tip, RESULT_JSON_PATH) or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def remote_status(
    repo: str, branch: str, as_json: bool, echo: Callable[[str], None], err: Callable[[str], None]
) -> int:
    """`status --remote`: what the orchestrator's side sees: the state on the remote, the
    MP in its inbox, and whether the engine is up (its heartbeat)."""
    try:
        report = read_remote(Sender(repo, branch, echo, err))
    except SyncError as e:
        err(f"mp-engine status --remote: {e}")
        return ExitCode.GIT
    if as_json:
        echo(json.dumps(report, indent=2))
        return ExitCode.OK
    st, eng = report["state"], report["engine"]
    halt = st.get("halt") or {}
    lines = [
        f"remote {repo} ({branch}) at {report['tip'][:12]}",
        f"  engine:   {eng['engine']}"
        + (f" (last heartbeat {eng['last_beat']}, {eng['age']:g} s ago)" if eng.get("last_beat") else "")
        + (f": {eng['why']}" if eng.get("why") else ""),
        f"  state:    {st.get('status', '?')}, current {st.get('current', '?')} (updated {st.get('last_updated', '?')})",
        f"  doing:    {report['progress']}",
        f"  inbox:    {report['inbox'] or 'empty'}",
    ]
    if eng.get("micro_tasks"):  # parallel tasks, as the last heartbeat saw them
        running = (f"{t.get('mt')} iteration {t.get('iteration')} ({t.get('level_name')})" for t in eng["micro_tasks"])
        lines.append(f"  tasks:    {', '.join(running)}")
    if halt:
        lines.append(
            f"  halted:   on {halt.get('mp_id')}: {halt.get('reason')}; lift with `Approves: {halt.get('mp_id')}`"
        )
    if st.get("last_result"):
        r = st["last_result"]
        lines.append(f"  last:     {r.get('mp_id')} {r.get('status')} at {r.get('finished_at')}")
    if pr := report.get("pull_request"):
        rounds = [c.get("state") if isinstance(c, dict) else c for c in pr.get("ci_rounds") or []]
        ci = pr.get("ci_now") or ", ".join(map(str, rounds))
        lines.append(f"  pull request: #{pr.get('number')} {pr.get('url')} (CI: {ci or 'not judged yet'})")
    echo("\n".join(lines))
    return ExitCode.OK
