"""`mp-engine worker`: serve a task queue. Each attempt runs in a thread of its own
(host.py) while the activity heartbeats every second from the event loop, whatever the
agent prints (it may be silent for minutes): a worker that dies stops heartbeating and
Temporal gives its attempt to another worker after `[fleet] heartbeat_timeout`. A cancel
arrives with a heartbeat's answer; the attempt's process group is killed and the
activity ends cancelled once it is.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio import activity
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from mp_engine.config.fleet import FleetConfig
from mp_engine.core import secretenv
from mp_engine.fleet.host import WorkerHost
from mp_engine.fleet.spec import ACTIVITY, AttemptResult, AttemptSpec
from mp_engine.fleet.temporal import connect
from mp_engine.fleet.workflow import AttemptWorkflow

HEARTBEAT = 1.0  # seconds between heartbeats (a cancel is seen within about this)
SHUTDOWN_GRACE = timedelta(seconds=5)  # running attempts are cancelled after this on SIGTERM


class Attempts:
    def __init__(self, host: WorkerHost, threads: ThreadPoolExecutor):
        self.host = host
        self.threads = threads

    @activity.defn(name=ACTIVITY)
    async def run_attempt(self, spec: AttemptSpec) -> AttemptResult:
        info = activity.info()
        activity.logger.info("attempt %s (try %d) on %s", spec.attempt_id, info.attempt, self.host.identity)
        cancel = threading.Event()
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self.threads, self.host.run, spec, cancel, info.attempt)
        try:
            while True:
                done, _ = await asyncio.wait({job}, timeout=HEARTBEAT)
                if done:
                    return job.result()
                activity.heartbeat()
        except asyncio.CancelledError:
            cancel.set()  # the agent's (or a check's) process group is killed
            await asyncio.wait({job})
            raise


async def serve(
    cfg: FleetConfig,
    host: WorkerHost,
    *,
    queue: str,
    max_parallel: int,
    stop: asyncio.Event,
    metrics: str = "",
) -> None:
    """Poll `queue` until `stop` is set. `metrics`: "host:port" of a Prometheus endpoint
    with the Temporal SDK's metrics of this worker (its activities, polls and latencies)."""
    runtime = Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=metrics))) if metrics else None
    client = await connect(cfg, secretenv.environ(), identity=host.identity, runtime=runtime)
    with ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="mp-attempt") as threads:
        worker = Worker(
            client,
            task_queue=queue,
            workflows=[AttemptWorkflow],
            activities=[Attempts(host, threads).run_attempt],
            max_concurrent_activities=max_parallel,
            max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT),
            default_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT),
            graceful_shutdown_timeout=SHUTDOWN_GRACE,
            identity=host.identity,
        )
        async with worker:
            await stop.wait()
