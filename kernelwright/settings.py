"""Where kernelwright keeps its results, settled once per command so that the store, the run artifacts, the build
cache and every child process agree: `KERNELWRIGHT_HOME` when set, else the per-user data folder
(harness.paths.default_home: `~/.local/share/kernelwright` on Linux), never the current folder. Pure path logic:
`kernelwright --help` imports nothing heavy, and nothing here creates a folder."""

from __future__ import annotations

import os
from pathlib import Path

from harness.paths import HOME_VARIABLE, home

LEGACY_FOLDER = "runs"  # where releases before the per-user home kept results: ./runs, or the nearest one above
STORE_FILE = "kernelwright.db"  # the same name as store.db.STORE_FILE (imported there with SQLAlchemy)


def legacy_store(start: Path) -> Path | None:
    """The nearest `runs/` folder holding a store, in `start` or one of its parents: where an earlier release
    kept this project's results."""
    for folder in (start, *start.parents):
        if (folder / LEGACY_FOLDER / STORE_FILE).is_file():
            return folder / LEGACY_FOLDER
    return None


def settle_home() -> tuple[Path, str | None]:
    """The home for this command, exported as an absolute `KERNELWRIGHT_HOME` so that everything the command
    starts uses the same one; and a one-line notice when results of an earlier release sit in a `runs/` folder
    here or above that this home does not use (None otherwise)."""
    given = bool(os.environ.get(HOME_VARIABLE) or os.environ.get("KERNELWRIGHT_DB"))
    settled = home().absolute()
    os.environ[HOME_VARIABLE] = str(settled)
    old = None if given else legacy_store(Path.cwd())
    if old is None or old.resolve() == settled.resolve():
        return settled, None
    return settled, (f"note: results are now stored in {settled}, not in {old}; to keep using {old}, set "
                     f"KERNELWRIGHT_HOME={old}")
