"""The orchestrator's side, run wherever the channel repository can be reached: `send` (an MP,
an answer or a cancel, committed and pushed), `channel` and `remote` (what the remote says),
`orchestrate` (those operations as calls that return data), `mcp/` (them as MCP tools and a
GPT Action, with OAuth)."""
