"""Issues as a source of work (`[repos.NAME] issues_label`, opt-in): which issues wait, and
taking one so that no two engines, and no restart, take it twice.

Taking is a label swap: the `taken_label` is added first, then `issues_label` removed. The
forge removes a label once: the engine whose removal succeeds has the issue; another that
tries gets "no such label" (GitHub answers 404) and leaves it. An engine killed between the
two calls leaves the issue with both labels: still waiting, and taken by whoever removes
the label next, itself after its restart included.
"""

from __future__ import annotations

from mp_engine.forge.base import Forge, Issue


def waiting(forge: Forge, label: str) -> list[Issue]:
    """Open issues with `label` (pull requests left out), oldest first; one with the taken
    label too was being taken when an engine died, and waits still."""
    return sorted((i for i in forge.labelled_issues(label)), key=lambda i: i.number)


def take(forge: Forge, issue: Issue, label: str, taken_label: str) -> bool:
    """True when this engine took `issue`; False when another did first."""
    forge.add_label(issue.number, taken_label)
    return forge.remove_label(issue.number, label)
