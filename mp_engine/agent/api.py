"""The agent package's face (issue #40): what the rest of mp-engine uses of it, and nothing
else (an import-linter contract says so). The engine runs agent MPs through
`AgentExecutor` (whose `advise` is `[diagnose]`'s opinion on any MP that failed);
answering records a person's answer in a run (`add_answer`), reviewing a reviewer's
comments (`add_review`); `init` and `doctor` read the
agent CLIs' presets; the fleet runs one attempt on another host with the same parts and
judgement as here (`Attempt`, `WorkspaceParts`, `judge`). What `status`, the heartbeat and
the dashboard read of a run is `agent/progress.py`, kept light on purpose (bench figure 8).
"""

from __future__ import annotations

from mp_engine.agent.call.endpoints import reach
from mp_engine.agent.call.invoke import Call, CallKind
from mp_engine.agent.call.limiter import CallLimiter
from mp_engine.agent.call.presets import CONFORMANCE, PRESETS, chain, cli_of, codex_temp, installed_version
from mp_engine.agent.consult import Suggestion
from mp_engine.agent.evidence import IterationEvidence, Snapshot, Worktree
from mp_engine.agent.executor import AgentExecutor
from mp_engine.agent.judge.checks import CheckRun, iter_check
from mp_engine.agent.plan.decompose import decompose
from mp_engine.agent.run.answers import add as add_answer
from mp_engine.agent.run.answers import received as answers_received
from mp_engine.agent.run.attempt import Attempt, AttemptOutcome, Runner, call, judge, protect
from mp_engine.agent.run.loop import Dispatch
from mp_engine.agent.run.parts import WorkspaceParts, workspace_parts
from mp_engine.agent.run.reviews import add as add_review
from mp_engine.agent.run.reviews import received as reviews_received
from mp_engine.agent.run.steps import AgentSteps
from mp_engine.agent.run.worktrees import TaskWorktrees
from mp_engine.agent.scope import RunScope, WorkspaceScope

__all__ = [
    "CONFORMANCE",
    "PRESETS",
    "AgentExecutor",
    "AgentSteps",
    "Attempt",
    "AttemptOutcome",
    "Call",
    "CallKind",
    "CallLimiter",
    "CheckRun",
    "Dispatch",
    "IterationEvidence",
    "Runner",
    "RunScope",
    "Snapshot",
    "Suggestion",
    "TaskWorktrees",
    "WorkspaceParts",
    "WorkspaceScope",
    "Worktree",
    "add_answer",
    "add_review",
    "answers_received",
    "call",
    "chain",
    "cli_of",
    "codex_temp",
    "decompose",
    "installed_version",
    "iter_check",
    "judge",
    "protect",
    "reach",
    "reviews_received",
    "workspace_parts",
]
