"""The forge: pull requests, CI, reviews and issues on GitHub, and the mirrors of the
repositories MPs work on (issue #41, docs/PULL_REQUESTS.md)."""
