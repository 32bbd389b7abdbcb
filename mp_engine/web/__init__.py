"""`mp-engine dashboard` and `[dashboard] listen` (issue #32): a read-only live view of
the engine in a browser, from a JSON API (documents.py), pages rendered on the server
(app.py, templates/), pushed live by server-sent events (live.py). Starlette, uvicorn and
Jinja2 come with the `dashboard` extra; nothing imports them unless a dashboard is served."""

from __future__ import annotations

from mp_engine.core.errors import ConfigError


def require() -> None:
    """Raise a ConfigError with the fix when the dashboard's libraries are missing."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise ConfigError(
            f"the dashboard needs Starlette, uvicorn and Jinja2 ({e.name} is missing): "
            "pip install 'mp-engine[dashboard]'"
        ) from e
