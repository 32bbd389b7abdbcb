"""9. Agent-loop overhead: the engine's own time per iteration of the agent executor.

Needs the agent executor (issue #4). Until it exists this reports that it was not
measured instead of inventing a number.
"""

from __future__ import annotations

import importlib.util

from bench.common import Row


def run(reps: int) -> list[Row]:
    if importlib.util.find_spec("mp_engine.executors.agent") is None:
        return [
            Row(
                "9. agent-loop overhead per iteration",
                None,
                "-",
                None,
                "<= 20 ms",
                None,
                note="not measured: no agent executor yet",
            )
        ]
    from bench.agentloop_impl import measure  # written with the executor

    return measure(reps)
