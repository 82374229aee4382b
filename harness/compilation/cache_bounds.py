"""Bounded build artifacts (issue 44): one build may write at most `output_mb` (a candidate's source with a 300 MB
static array left 2 x 301 MB in the cache before), and the build cache is kept under `cache_mb` by evicting the
entries used longest ago. An entry's modification time is when it was last built or served (`touch`); entries of
the running evaluation, and any served in the last `GRACE_S` (another evaluation running beside this one may still
load them), are never evicted. The precompiled headers (`pch/`) have their own bound (harness/compilation/pch.py)."""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

GRACE_S = 1800.0  # longer than one evaluation's builds and loads take
_ENTRY = re.compile(r"^[0-9a-f]{64}$")


def folder_mb(path: Path) -> float:
    """The bytes of every regular file under `path` (links not followed), in MB."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total / (1 << 20)


def touch(entry: Path) -> None:
    """Mark a cache entry used now."""
    try:
        os.utime(entry)
    except OSError:
        pass


def evict(cache_root: Path, cache_mb: float, keep: set[str], now: float | None = None) -> list[str]:
    """Remove the entries used longest ago until the cache's entries hold at most `cache_mb`; never one in `keep`
    (the running evaluation's keys) nor one used within `GRACE_S`. Returns the keys removed."""
    if not cache_root.is_dir():
        return []
    now = time.time() if now is None else now
    entries = []
    for entry in cache_root.iterdir():
        if entry.is_dir() and not entry.is_symlink() and _ENTRY.match(entry.name):
            try:
                entries.append((entry.stat().st_mtime, entry, folder_mb(entry)))
            except OSError:
                continue
    total = sum(size for _, _, size in entries)
    removed = []
    for used, entry, size in sorted(entries, key=lambda e: e[0]):
        if total <= cache_mb:
            break
        if entry.name in keep or now - used < GRACE_S:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        total -= size
        removed.append(entry.name)
    return removed
