"""Alerts (issue #32): the engine tells a person when something needs one. `rules.py` turns
an event into an alert (what happened, for which MP, the one command that acts on it);
`outbox.py` keeps undelivered alerts on disk; `deliver.py` sends them (Apprise URLs and a
command) from a thread of its own, retried with backoff, never in the engine's way."""
