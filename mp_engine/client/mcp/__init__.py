"""`mp-engine mcp`: the orchestrator's side of the channel for LLM clients. start.py reads
the command line; server.py builds the MCP server (tools.py's operations) and its HTTP side:
guard.py (public URL, Host, refused requests), gate/ (what the public side lets in and how
often: the client's address, the passphrase lockout, registration, /authorize's errors,
body caps), provider.py, consent.py and store.py (OAuth 2.1), openapi.py (the GPT Action);
clients.py is `mcp clients`, `mcp revoke` and `mcp approve-login`."""
