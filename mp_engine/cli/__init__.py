"""The command line: `entry` (the entry point, fast for `status`), `main` (the group and the
error boundary), and the commands by what a person does with them: `workspace`, `engine`,
`inspect`, `orchestrator`; `group` holds the click group and `--root`."""
