"""An agent run's state as data and its decisions as pure reducers (issue #40): `model`
(RunState, TaskState, Cursor), `kinds` (the enums and Effect), one module per kind of
record (`iteration`, `planning`, `tasks`, `answer`), what they share (`ending`,
`campaign`), and `apply` (the table of reducers, replay). Nothing here acts: the run
(agent/run/) carries out the effects."""
