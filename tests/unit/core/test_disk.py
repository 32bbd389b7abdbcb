"""The file system under the workspace, and the reserve freed when it fills."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from mp_engine.core.disk import Reserve, describe, is_full, mount_of, used_fraction


def test_a_full_disk_is_recognised_through_wrapped_errors():
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise RuntimeError("could not write the artifact") from e
    except RuntimeError as wrapped:
        assert is_full(wrapped)
    assert is_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not is_full(OSError(errno.EACCES, "Permission denied")) and not is_full(ValueError("x"))


def test_the_longest_mount_point_holds_the_path(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/a / ext4 rw 0 0\n/dev/b /srv xfs rw 0 0\nfs /srv/my\\040disk nfs rw 0 0\n")
    assert mount_of(tmp_path / "x", mounts) == ("/", "ext4")  # tmp_path is under /
    assert mount_of(Path("/srv/data"), mounts) == ("/srv", "xfs")
    assert mount_of(Path("/srv/my disk/w"), mounts) == ("/srv/my disk", "nfs")
    assert mount_of(tmp_path, tmp_path / "no-such-table") is None
    assert "KiB free" in describe(tmp_path)


def test_the_reserve_is_made_once_topped_up_and_released(tmp_path):
    r = Reserve(tmp_path / ".engine" / "reserve", 200_000)
    assert r.ensure() and r.path.stat().st_size >= 200_000
    inode = r.path.stat().st_ino
    assert r.ensure() and r.path.stat().st_ino == inode  # already there: untouched
    assert r.release() >= 200_000 and not r.path.exists()
    assert r.release() == 0
    assert Reserve(tmp_path / "none", 0).ensure() and not (tmp_path / "none").exists()


def test_the_used_fraction_is_what_df_counts_and_none_where_it_cannot_be_read(tmp_path):
    st = os.statvfs(tmp_path)
    used = used_fraction(tmp_path)
    assert used is not None and 0 <= used <= 1
    in_use = st.f_blocks - st.f_bfree
    assert abs(used - in_use / (in_use + st.f_bavail)) < 0.01  # others write meanwhile
    assert used_fraction(tmp_path / "no" / "such" / "dir") is None
