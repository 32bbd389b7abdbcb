"""What the public side of `mp-engine mcp --http` lets in, and how often (issue #46): the
limits (limits.py), the client's address behind a tunnel (peer.py), the passphrase lockout
(lockout.py), client registration and redirect URIs (registration.py), the authorization
endpoint's errors (authorize.py) and request bodies (body.py)."""
