"""The one workflow: an attempt at a micro-task is one activity, `run_attempt`, on the
queue its agent level is routed to.

Why a workflow per attempt, not one per MP (docs/FLEET.md): the engine's ledger and
the run's state (agent/state/) already decide what runs next and survive `kill -9`; a workflow per MP would
be a second copy of that brain. An attempt's workflow id (`mp-engine/<run>/<MT>/<n>`)
refuses a second start, so a restarted engine re-attaches to what runs.

Retries cover a lost worker (its heartbeat stopped) or a worker that could not set the
attempt up (its clone, the push); an agent that fails returns a result like any other,
and the engine decides. A cancel waits until the worker has stopped the agent's process
group (`WAIT_CANCELLATION_COMPLETED`).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from mp_engine.fleet.spec import ACTIVITY, WORKFLOW, AttemptResult, AttemptSpec

START_TO_CLOSE_GRACE = 600.0  # seconds beyond the MP's budget: checks and the push after a long call


@workflow.defn(name=WORKFLOW)
class AttemptWorkflow:
    @workflow.run
    async def run(self, spec: AttemptSpec) -> AttemptResult:
        return await workflow.execute_activity(
            ACTIVITY,
            spec,
            result_type=AttemptResult,
            task_queue=spec.queue,
            start_to_close_timeout=timedelta(seconds=spec.budget + START_TO_CLOSE_GRACE),
            heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_interval=timedelta(seconds=30),
                maximum_attempts=spec.max_tries,
                non_retryable_error_types=["AttemptRefused"],
            ),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
