"""`[fleet]` (docs/FLEET.md): Temporal answers, and at least one worker polls each queue
the engine sends attempts to."""

from __future__ import annotations

from mp_engine.commands.doctor.check import FAIL, OK, Check
from mp_engine.config.load import Config
from mp_engine.core import secretenv
from mp_engine.core.errors import ConfigError
from mp_engine.core.workspace import Workspace


def fleet(ws: Workspace, config: Config) -> Check:
    cfg = config.fleet
    if not cfg.enabled:
        return Check("fleet", OK, "off: agent tasks run on this host ([fleet] temporal is not set)")
    from mp_engine.fleet import require

    try:
        require()
    except ConfigError as e:
        return Check("fleet", FAIL, str(e), "pip install 'mp-engine[fleet]'")
    from mp_engine.fleet.temporal import fix_for, survey

    report = survey(cfg, secretenv.environ())
    if report.get("error"):
        return Check("fleet", FAIL, str(report["error"]), fix_for(cfg))
    queues: dict[str, list[str]] = report["queues"]  # type: ignore[assignment]
    idle = [q for q, who in queues.items() if not who]
    seen = "; ".join(f"queue {q}: {len(who)} worker(s) ({', '.join(who) or 'none'})" for q, who in queues.items())
    if idle:
        return Check(
            "fleet",
            FAIL,
            f"Temporal at {cfg.temporal} answers, but no worker polls {', '.join(idle)}: their tasks would wait ({seen})",
            f"start a worker on a host with the agents: mp-engine worker --temporal {cfg.temporal} "
            f"--task-queue {idle[0]} --root DIR (docs/FLEET.md)",
        )
    return Check("fleet", OK, f"Temporal at {cfg.temporal} answers; {seen}")
