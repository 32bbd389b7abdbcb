"""Executors: how an MP's work is carried out once it has been claimed.

`shell` runs the MP's fenced blocks in order (the simplest executor); later executors
(`agent`) drive a coding-agent CLI. Every executor returns an `ExecResult` and leaves its
evidence in the run archive; the engine turns that into the result and the state.
"""

from __future__ import annotations

from mp_engine.execute.base import ExecResult, Executor
from mp_engine.execute.shell import ShellExecutor

__all__ = ["ExecResult", "Executor", "ShellExecutor"]
