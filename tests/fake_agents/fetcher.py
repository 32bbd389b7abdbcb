#!/usr/bin/env python3
"""A fake agent that only fetches: its endpoint ($OPENAI_API_BASE, as aider's), then each URL
after `--fetch`, printing each status; at the first that fails it says why and exits 1, as
a CLI that cannot reach its API does. For the sandbox's network (issue #44)."""

import os
import sys
import urllib.request

more = sys.argv[sys.argv.index("--fetch") + 1 :] if "--fetch" in sys.argv else []
for url in [os.environ["OPENAI_API_BASE"], *more]:
    try:
        print(url, urllib.request.urlopen(url, timeout=5).status)
    except OSError as e:
        print(url, "failed:", e)
        sys.exit(1)
