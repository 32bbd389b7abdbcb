"""The git channel: pull what the orchestrator pushed, push what the engine recorded.

`channel.py` is the facade the engine calls (`GitChannel`, or with git off `LocalChannel` from
local.py); the other modules are its stages.
"""
