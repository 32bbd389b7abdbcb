"""Watchers: turn filesystem events into wake-ups of the engine loop.

`native` uses the platform's observer (inotify on Linux, FSEvents on macOS); `polling`
snapshots the directory with `stat`, for NFS/SMB/FUSE mounts where inotify does not see
writes made elsewhere. Either way an event only wakes the loop; the tick rescans.
`auto.py` picks one by `[watch] mode`.
"""
