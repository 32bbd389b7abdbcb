"""One finding of `mp-engine doctor`: ok, warn or fail, what was found, and the fix."""

from __future__ import annotations

from dataclasses import dataclass

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # ok, warn, fail
    message: str
    fix: str = ""

    def line(self) -> str:
        tag = {OK: "ok  ", WARN: "warn", FAIL: "FAIL"}[self.level]
        return f"[{tag}] {self.name}: {self.message}" + (f" -- fix: {self.fix}" if self.fix else "")
