"""Secret environment variables, held by the daemon instead of its environment (issue #20).

A step runs as the daemon's user, so it can read `/proc/<pid>/environ` of every process
of that user that is not marked non-dumpable. The daemon is (`pids.make_undumpable`); the
git, ssh and credential-helper processes it starts while a step runs (the cancel watch,
the heartbeat) are not, and they inherit `os.environ`. So at start `hold` moves every
variable `[secrets]` names out of `os.environ` into this module, and `environ()` is the
view the engine builds children's environments (`process.scrub_env`) and its redactor
from: a step or an agent level whose `env_allow` names a held variable still gets it,
git and everything else never does.

`MP_ENGINE_*` variables are configuration overrides, read at start and again when the
configuration is reloaded; they are never held.
"""

from __future__ import annotations

import fnmatch
import os
from collections import ChainMap
from collections.abc import Iterable, Mapping

_held: dict[str, str] = {}


def is_secret(name: str, names: Iterable[str], patterns: Iterable[str]) -> bool:
    """True when `[secrets]` names `name`, exactly (`env`) or by a pattern (`env_patterns`,
    case-insensitive)."""
    if name.startswith("MP_ENGINE_"):
        return False
    upper = name.upper()
    return name in names or any(fnmatch.fnmatchcase(upper, p.upper()) for p in patterns)


def hold(names: Iterable[str], patterns: Iterable[str]) -> list[str]:
    """Move the secret variables out of `os.environ` into the held store; their names."""
    names, patterns = tuple(names), tuple(patterns)
    taken = sorted(n for n in os.environ if is_secret(n, names, patterns))
    for name in taken:
        _held[name] = os.environ.pop(name)
    return taken


def environ() -> Mapping[str, str]:
    """The process's environment with the held secrets: what `env_allow` chooses from."""
    return ChainMap(_held, os.environ) if _held else os.environ


def held() -> list[str]:
    """The names held, sorted."""
    return sorted(_held)


def release() -> None:
    """Put the held variables back into `os.environ` (tests; an in-process daemon's end)."""
    while _held:
        name, value = _held.popitem()
        os.environ.setdefault(name, value)
