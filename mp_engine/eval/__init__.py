"""`mp-engine eval` (issue #43): every task of a task set through the real pipeline, judged by
tests the agent never saw, reported as resolve rate, cost and time (docs/EVAL.md).

The data path reads like an evaluation: a task set (`tasks`, `demo`, `history`) → the plan of
what is left (`phases`, pure) → the eval directory (`layout`) → per task: the environment's
probe and the judging (`judge`, with `checkout` and `testcmd`), the agent's workspace
(`taskspace`) run by `mp-engine once` (`child`), what the run cost (`measure`) → the results
(`results`) → the report (`report`, `stats`, `markdown`, `page`). `driver` sequences them,
N tasks at once. The package face imports nothing.
"""
