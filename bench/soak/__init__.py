"""The soak (issue #45): a mixed, seeded workload through the real daemon and a real git
remote, with faults at random moments, and invariants checked from the files all the way
through; figures written to bench/SOAK.md.

    make soak                                   # the long run (SOAK_MPS, SOAK_SEED, SOAK_FAULTS)
    .venv/bin/python -m bench.soak --mps 60 --faults 12 --seed 7 --no-write

Parts: `workload` (the seeded schedule of MPs and faults, pure), `world` (the remote served
by `git daemon`, the engine's workspace on a small file system, the daemon, the alert
receiver), `routes` (the orchestrator: the client's calls, `mp-engine send`, the MCP tools
over stdio), `faults` (each fault and what recovery means for it), `observe` (reading the
remote and the host), `watch` (the state file and the daemon's resources, all the time),
`check` (the invariants), `driver` (the run), `report` (SOAK.md).
"""
