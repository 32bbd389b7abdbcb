"""Executors: how an MP's work is carried out once it has been claimed.

`shell` runs the MP's fenced blocks in order (the simplest executor); `agent` (the agent/
package) drives a coding-agent CLI. Every executor returns an `ExecResult` (base.py) and
leaves its evidence in the run archive; the engine turns that into the result and the state.
"""
