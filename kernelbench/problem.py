"""The `Problem` record and loaders for single KernelBench files and KernelBench-style folders."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
_FILE_NAME = re.compile(r"^(?P<id>\d+)_(?P<name>.+)\.py$")
_LEVEL_DIR = re.compile(r"^level(?P<level>\d+)$")
SHRUNK_MARK = "# kernelwright: shrunk to the CPU budget: "  # the first line of a shrunk problem's source


class ProblemError(ValueError):
    """A problem file or folder that cannot be used; the message says what to fix."""


@dataclass(frozen=True)
class Problem:
    """One KernelBench-format program: `class Model`, `get_inputs()`, `get_init_inputs()`."""

    name: str
    source: str
    level: int | None = None
    problem_id: int | None = None
    path: str | None = None

    @property
    def fingerprint(self) -> str:
        """Content hash: results stay tied to the exact revision of the problem's source."""
        return fingerprint_source(self.source)

    @property
    def key(self) -> str:
        """A stable human-readable identifier, e.g. `level1/19_ReLU`."""
        stem = f"{self.problem_id}_{self.name}" if self.problem_id is not None else self.name
        return f"level{self.level}/{stem}" if self.level is not None else stem

    @property
    def shrunk(self) -> str | None:
        """The size changes when this is a shrunk problem (`dim 393216->16384`), else None."""
        return shrink_note(self.source)

    @property
    def label(self) -> str:
        """The key, with the shrink marker and sizes when the problem was shrunk: results on it are not the
        benchmark's own."""
        return problem_label(self.key, self.shrunk)

    @property
    def file_name(self) -> str:
        """Where the problem lives in a KernelBench-style folder: `level1/19_ReLU.py`, or `Name.py`."""
        return f"{self.key}.py"


def shrink_note(source: str) -> str | None:
    """The size changes recorded in a shrunk problem's first line, or None for a problem at its own sizes."""
    first = source.lstrip("\n").split("\n", 1)[0]
    return first.removeprefix(SHRUNK_MARK).strip() if first.startswith(SHRUNK_MARK) else None


def problem_label(name: str, shrunk: str | None) -> str:
    return f"{name} (shrunk: {shrunk})" if shrunk else name


def fingerprint_source(source: str) -> str:
    normalized = source.replace("\r\n", "\n").strip() + "\n"
    return hashlib.sha256(normalized.encode()).hexdigest()


def check_problem_source(source: str, origin: str) -> None:
    """Raise ProblemError unless `source` parses and defines Model, get_inputs and get_init_inputs."""
    try:
        tree = ast.parse(source, filename=origin)
    except SyntaxError as exc:
        raise ProblemError(f"{origin}: not valid Python (line {exc.lineno}: {exc.msg})") from exc
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        raise ProblemError(
            f"{origin}: not a KernelBench problem, it does not define {', '.join(missing)} "
            "(a problem needs `class Model`, `get_inputs()` and `get_init_inputs()`)"
        )


def problem_from_source(source: str, name: str, level: int | None = None,
                        problem_id: int | None = None, path: str | None = None) -> Problem:
    check_problem_source(source, path or name)
    return Problem(name=name, source=source, level=level, problem_id=problem_id, path=path)


def load_problem(path: str | Path) -> Problem:
    """Load one KernelBench-format file; level and id come from `levelN/<id>_<Name>.py` when present."""
    file = Path(path)
    if not file.is_file():
        raise ProblemError(f"{file}: no such problem file")
    try:
        source = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{file}: cannot read it ({exc})") from exc
    match = _FILE_NAME.match(file.name)
    level_match = _LEVEL_DIR.match(file.parent.name)
    return problem_from_source(
        source,
        name=match["name"] if match else file.stem,
        level=int(level_match["level"]) if level_match else None,
        problem_id=int(match["id"]) if match else None,
        path=str(file),
    )


def _level_dirs(root: Path, levels: set[int] | None) -> list[tuple[int, Path]]:
    found: list[tuple[int, Path]] = []
    for candidate_root in (root, root / "KernelBench"):
        if not candidate_root.is_dir():
            continue
        for child in sorted(candidate_root.iterdir()):
            match = _LEVEL_DIR.match(child.name)
            if child.is_dir() and match and (levels is None or int(match["level"]) in levels):
                found.append((int(match["level"]), child))
        if found:
            break
    return found


def load_problems(root: str | Path, levels: set[int] | None = None) -> list[Problem]:
    """Load a KernelBench checkout or any folder: `levelN/<id>_<Name>.py` files, or plain `.py` problems.

    Files that are not problems are skipped in a plain folder, but a malformed file in a level folder is an
    error, because a silently missing benchmark problem skews every metric computed over the level.
    """
    folder = Path(root)
    if folder.is_file():
        return [load_problem(folder)]
    if not folder.is_dir():
        raise ProblemError(f"{folder}: no such file or folder")
    level_dirs = _level_dirs(folder, levels)
    if level_dirs:
        problems = [load_problem(f) for _, d in level_dirs for f in sorted(d.glob("*.py"), key=_sort_key)]
    else:
        problems = []
        for file in sorted(folder.glob("*.py"), key=_sort_key):
            try:
                problems.append(load_problem(file))
            except ProblemError:
                continue
    if not problems:
        raise ProblemError(f"{folder}: no KernelBench problems found (expected levelN/<id>_<Name>.py files)")
    return problems


def _sort_key(file: Path) -> tuple[int, str]:
    match = _FILE_NAME.match(file.name)
    return (int(match["id"]) if match else 1 << 30, file.name)
