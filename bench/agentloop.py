"""9. Agent-loop overhead: the engine's own time per iteration of the agent executor.

The measurement is in `agentloop_impl.py`; this stub keeps `python -m bench` working on
a checkout without the agent executor (it then says "not measured" rather than invent a
number).
"""

from __future__ import annotations

import importlib.util

from bench.common import Row


def run(reps: int) -> list[Row]:
    if importlib.util.find_spec("mp_engine.agent.executor") is None:
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
