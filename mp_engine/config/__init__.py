"""Configuration: `mp-engine.toml` plus `MP_ENGINE_<SECTION>__<KEY>` overrides.

Everything is validated by pydantic before any thread starts; an invalid value or an
unknown key is a `ConfigError` whose message names the key and where it came from.
One module per group of sections (`sections.py`, `agent.py`, `fleet.py`, `notify.py`,
`dashboard.py`, `diagnose.py`, `repos.py`); `load.py` holds `Config` and `load_config`; `cache.py` the
validated configuration as JSON for read-only commands, which must not import pydantic.
This face imports none of them (bench figure 8: `status` reads the cache only)."""
