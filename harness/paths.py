"""Where kernelwright keeps its files (the results store, run artifacts, the build cache, scratch folders):
`KERNELWRIGHT_HOME` when set, else one per-user data folder (`~/.local/share/kernelwright` on Linux), wherever
a command runs. Pure path logic: importing this creates nothing."""

from __future__ import annotations

import os
from pathlib import Path

HOME_VARIABLE = "KERNELWRIGHT_HOME"


def default_home() -> Path:
    """The per-user data folder: platformdirs' user data dir (honours XDG_DATA_HOME on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("kernelwright", appauthor=False))


def home() -> Path:
    """The home of every command and process: `KERNELWRIGHT_HOME`, else `default_home()`."""
    given = os.environ.get(HOME_VARIABLE)
    return Path(given) if given else default_home()


def build_cache_dir() -> Path:
    """Finished builds, keyed by content; shared by every evaluation (and process) on the machine."""
    return Path(os.environ.get("KERNELWRIGHT_BUILD_CACHE", home() / "builds")).resolve()


def scratch_root() -> Path:
    return home() / "scratch"


def code_root() -> Path:
    """The folder that holds the `harness` package (the project in a checkout, site-packages in an install): what a
    jailed child must see and put on its PYTHONPATH to import the harness's own code."""
    return Path(__file__).resolve().parent.parent
