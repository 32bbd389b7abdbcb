"""One MP-1.3 pass, stage by stage: `engine` (the tick, under the lock), `queued` (versions the
slot lost), `admit` (refuse, hold, or take an MP), `claim` (RUNNING, the run archive),
`drive` (the executor and its outcome), `answering` and `cancel_waiting` (a person's word
between runs), `finalize` (result, state, slot, push), `synced` (a sync point's problem);
`context` is what they share."""
