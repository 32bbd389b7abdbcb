"""The entry point of `mp-engine` and `python -m mp_engine`.

A plain `status` (`[--root DIR] [--json]`) runs without click, structlog or pydantic:
scripts poll it, and bench figure 8 holds it to 3x `python -c pass`. Everything else,
`status --help` and `status --remote` included, goes to the click CLI (cli.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path


def plain_status(args: Sequence[str]) -> tuple[Path, bool] | None:
    """(root, as_json) when `args` is `status` with only `--root` and `--json`."""
    if not args or args[0] != "status":
        return None
    root, as_json, rest = os.environ.get("MP_ENGINE_ROOT") or ".", False, list(args[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            as_json = True
        elif arg == "--root" and rest and not rest[0].startswith("-"):
            root = rest.pop(0)
        elif arg.startswith("--root=") and len(arg) > len("--root="):
            root = arg[len("--root=") :]
        else:
            return None
    return Path(root), as_json


def main(argv: Sequence[str] | None = None) -> int:
    """The process's entry (`argv` None: sys.argv) or a call from a test (its `argv`)."""
    code = run(list(sys.argv[1:] if argv is None else argv))
    if argv is None and "temporalio" in sys.modules:
        # Temporal's Rust core keeps threads that may touch the interpreter while it
        # finalizes, which then aborts (SIGABRT, "PyGILState_Release: thread state ...
        # must be current"; temporalio/sdk-python#300). Its users' workaround: once the
        # command is done, leave without finalizing.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def run(args: list[str]) -> int:
    fast = plain_status(args)
    if fast is None:
        from mp_engine.cli.main import main as cli_main

        return cli_main(args)
    from mp_engine.commands.status import status
    from mp_engine.core.errors import MpEngineError
    from mp_engine.core.exitcodes import for_error

    try:
        return int(status(fast[0], fast[1], print, color=sys.stdout.isatty()))
    except MpEngineError as e:
        print(f"mp-engine: {e}", file=sys.stderr)
        return for_error(e)
