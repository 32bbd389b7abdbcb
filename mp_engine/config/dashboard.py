"""`[dashboard]`: the live dashboard served by the daemon itself (README, Operations)."""

from __future__ import annotations

from pydantic import Field, model_validator

from mp_engine.config.section import Section, listen_address

DEFAULT_LISTEN = "127.0.0.1:8470"


class DashboardConfig(Section):
    """Off unless `listen` is set. A non-loopback address needs a token, read from the
    environment variable `token_env` (never from this file): the dashboard shows MPs,
    outputs and results, as `status` does."""

    listen: str = Field(
        "", description=f'"host:port" to serve the dashboard on, e.g. "{DEFAULT_LISTEN}" (port 0: any free)'
    )
    token_env: str = Field(
        "MP_ENGINE_DASHBOARD_TOKEN", description="the environment variable holding the token (required off loopback)"
    )
    max_streams: int = Field(32, ge=1, description="live event streams open at once, in all (each is a connection)")
    max_streams_per_client: int = Field(8, ge=1, description="live event streams one client address may hold")

    @model_validator(mode="after")
    def _address(self) -> DashboardConfig:
        if self.listen:
            listen_address(self.listen)
        return self

    @property
    def address(self) -> tuple[str, int]:
        return listen_address(self.listen)
