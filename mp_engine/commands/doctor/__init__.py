"""`mp-engine doctor`: what an operator gets wrong, checked before it bites.

Every check returns one `Check` (ok / warn / fail, what was found, and the fix). A check
never raises and never changes anything; `mp-engine doctor` exits 1 if any check fails.
`run.py` runs them in order; the checks live in workspace.py, git.py and host.py.
"""
