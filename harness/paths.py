"""Where kernelwright keeps its files: `runs/` under the working directory unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    return Path(os.environ.get("KERNELWRIGHT_HOME", "runs"))


def build_cache_dir() -> Path:
    """Finished builds, keyed by content; shared by every evaluation (and process) on the machine."""
    return Path(os.environ.get("KERNELWRIGHT_BUILD_CACHE", home() / "builds")).resolve()


def scratch_root() -> Path:
    return home() / "scratch"
