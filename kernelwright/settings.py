"""Where kernelwright keeps its results, settled once per command so that the store, the run artifacts, the build
cache and every child process agree: `KERNELWRIGHT_HOME` when set, else the nearest `runs/` folder that holds a
store, from the current folder up (as git finds `.git`), else `runs/` in the current folder (made by the first
command that records something). Pure path logic: `kernelwright --help` imports nothing heavy."""

from __future__ import annotations

import os
from pathlib import Path

HOME_VARIABLE = "KERNELWRIGHT_HOME"
HOME_FOLDER = "runs"
STORE_FILE = "kernelwright.db"  # the same name as store.db.STORE_FILE (imported there with SQLAlchemy)


def project_home(start: Path) -> Path | None:
    """The nearest `runs/` folder holding a store, in `start` or one of its parents."""
    for folder in (start, *start.parents):
        if (folder / HOME_FOLDER / STORE_FILE).is_file():
            return folder / HOME_FOLDER
    return None


def settle_home() -> Path:
    """The home for this command; a home found in a parent folder is exported as `KERNELWRIGHT_HOME` (an
    absolute path), so that everything this command starts uses the same one."""
    if os.environ.get(HOME_VARIABLE):
        return Path(os.environ[HOME_VARIABLE])
    cwd = Path.cwd()
    found = project_home(cwd)
    if found is None or found == cwd / HOME_FOLDER:
        return Path(HOME_FOLDER)
    os.environ[HOME_VARIABLE] = str(found)
    return found
