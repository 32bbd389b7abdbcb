"""The fleet (issue #30, docs/FLEET.md): one attempt at one micro-task, run by a worker on
another host through Temporal. The channel engine keeps the channel, the ledger and every
decision; a worker runs the agent call and the task's checks in its own clone, pushes the
work to `mp-task/<MP-id>/<MT-id>` and returns what happened.

    spec.py        what travels: the attempt (AttemptSpec) and its outcome (AttemptResult)
    temporal.py    the connection (TLS, API key, payload codec) and the task queues' pollers
    workflow.py    the one workflow: run the attempt's activity, retried only when a worker is lost
    dispatch.py    the engine side: start or re-attach, wait, cancel, bring the outcome home
    snapshot.py    the task's worktree as a commit on the work remote, and back
    host.py        the worker side: a clone, a worktree per attempt, the call and the checks
    worker.py      `mp-engine worker`: serve a task queue

Nothing here is imported unless `[fleet] temporal` is set (or `mp-engine worker` runs):
`temporalio` is the optional extra `mp-engine[fleet]`.
"""

from __future__ import annotations

from mp_engine.core.errors import ConfigError


def require() -> None:
    """ConfigError (exit 2) with the fix when the fleet extra is not installed."""
    try:
        import temporalio  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            "the fleet ([fleet] temporal, `mp-engine worker`) needs Temporal's SDK. Fix: "
            "pip install 'mp-engine[fleet]' in the engine's environment."
        ) from e
