"""A size limit the kernel enforces on an evaluation's scratch folder: the folder is a tmpfs of its own (mounted by
the parent, which needs root, as the jail's namespaces already do), so a candidate that writes more than its
allowance gets ENOSPC from the kernel instead of filling the disk, and the verdict can name the limit it hit.

Where the mount is refused (not root), the folder stays a plain directory and the evaluation records that it had
no quota. Mounts left by a kernelwright process that was killed are found by the pid in their folder's name and
detached the next time a scratch folder is made.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_REMOUNT = 0x2, 0x4, 0x20
MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)
_OWNER = re.compile(r"^eval-\d{8}-\d{6}-(\d+)-[0-9a-f]+$")


def _mount(source: str | None, target: Path, kind: str | None, flags: int, data: str) -> bool:
    encode = (lambda s: s.encode() if s is not None else None)
    return _libc.mount(encode(source), str(target).encode(), encode(kind), ctypes.c_ulong(flags), data.encode()) == 0


def mount_quota(folder: Path, size_bytes: int) -> bool:
    """Make `folder` (empty) a tmpfs of `size_bytes`; False where the kernel refuses (not root)."""
    return _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={max(size_bytes, 1 << 20)},mode=0755")


def grow(folder: Path, extra_bytes: int) -> None:
    """Room for files the harness itself writes there (the trial inputs, outputs saved by the child)."""
    size = capacity(folder)
    if size:
        _mount(None, folder, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={size + extra_bytes}")


def capacity(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_blocks * stats.f_frsize


def used(folder: Path) -> int:
    stats = os.statvfs(folder)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def is_quota(folder: Path) -> bool:
    """Whether `folder` is a mount point of its own (a quota), from the kernel's mount table."""
    return str(folder) in _mount_points()


def release(folder: Path) -> None:
    """Empty, detach and remove a scratch folder (its tmpfs frees its memory when detached)."""
    if is_quota(folder):
        _libc.umount2(str(folder).encode(), MNT_DETACH)
    shutil.rmtree(folder, ignore_errors=True)


def release_abandoned(root: Path) -> int:
    """Detach the quotas under `root` whose kernelwright process is gone (killed before it could); how many."""
    released = 0
    for point in _mount_points():
        path = Path(point)
        owner = _OWNER.match(path.name)
        if path.parent == root and owner and not _alive(int(owner.group(1))):
            release(path)
            released += 1
    return released


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mount_points() -> set[str]:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return set()
    return {line.split()[4].replace("\\040", " ") for line in lines}
