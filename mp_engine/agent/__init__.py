"""The agent executor (issue #4, docs/AGENT.md): a coding-agent CLI driven through a bounded,
verified loop, in rooms (docs/ARCHITECTURE.md): `run/` (the run and its one scheduler),
`state/` (its decisions as data and reducers), `call/`, `prompt/`, `judge/`, `plan/`,
`memory/`. The rest of mp-engine uses `api.py` (and reads `progress.py`), nothing else."""
