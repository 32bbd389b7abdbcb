"""A task added to a run whose tasks passed, when the pull request it opened is not done
(issue #41): CI failed on it (ci.py) or a reviewer asked for changes (review.py). It needs
every task that completed (not those a re-plan replaced: they never complete), every check
of the MP accepts it, and, one task at a time, it works on where the last task left the
run's worktree; the run's ending is undone."""

from __future__ import annotations

from mp_engine.agent.call.chain import chain_for
from mp_engine.agent.plan.decompose import MicroTask
from mp_engine.agent.plan.planner import micro_tasks
from mp_engine.agent.state.kinds import TaskStatus
from mp_engine.agent.state.model import Cursor, RunState, TaskState


def quoted(text: str) -> str:
    """Someone else's words as an indented block: their own headings never end the task's text."""
    return "\n".join("    " + line for line in text.splitlines())


def follow_up(s: RunState, ref: str, title: str, description: str) -> MicroTask:
    """Add the task; the run goes on with it."""
    n = len(s.tasks)
    planned = {
        "mt_id": f"MT-{n + 1:03d}",
        "ref": ref,
        "title": title,
        "description": description,
        "after": [i for i, t in enumerate(s.tasks) if t.status is TaskStatus.COMPLETED],
        "checks": list(range(len(s.plan.check_from))),
        "files": [],
        "domain": None,
    }
    new = micro_tasks([planned])
    s.plan = s.plan.extended(new)
    s.chains += [chain_for(s.cfg, t.domain) for t in new]
    s.tasks.append(TaskState(new[0].mt_id, new[0].title))
    s.final = None
    if not s.isolated:  # one at a time: it works on where the last task left the run's worktree
        s.tasks[n].status = TaskStatus.ACTIVE
        s.cursors[n] = Cursor(last_digest=s.cur.last_digest, prev_passed=set(s.cur.prev_passed))
        s.focus = n
    return new[0]
