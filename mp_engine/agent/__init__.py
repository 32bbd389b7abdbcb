"""The agent executor's parts (issue #4, docs/AGENT.md), one module per concern.

    decompose   MP -> micro-tasks (MT-001, ...) and which checks accept each
    chain       the escalation chain: levels, argv rendering
    prompt      a fresh prompt per iteration, built from artifacts only
    invoke      one agent call: timeouts, idle kill, env allowlist, failure class
    claims      the agent's untrusted claims: nonce'd tags and the status block
    evidence    per-iteration evidence, worktree fingerprint, SHA-256 manifest
    learnings   the learnings file fed into the next prompt, with compaction
    breakers    circuit breakers and the rolling-hour call limiter
    loopstate   the loop's decisions, replayed from the ledger's iteration records
    progress    the ProgressArtifact (status, resume point, waiting)
    certificate halting certificates and their diagnoses
    distill     distillation candidates under SYSTEM/distill/

`loop.py` sequences them (with `calling`, `recording`, `ending`); `executor.py` is the
Executor the engine calls.
"""
