"""The agent tests' `engine_for` fixture, for documents built from real agent runs."""

from tests.unit.agent.conftest import engine_for  # noqa: F401
