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


def code_root() -> Path:
    """The folder that holds the `harness` package (the project in a checkout, site-packages in an install): what a
    jailed child must see and put on its PYTHONPATH to import the harness's own code."""
    return Path(__file__).resolve().parent.parent
