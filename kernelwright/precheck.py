"""Checks of a command's arguments that need no heavy package: a missing file, a folder given for a file, a
problem name that is no bundled problem, an unknown choice. Commands run them before importing their services,
so a usage error prints in well under a second instead of after seconds of importing torch and SQLAlchemy. The
services keep their own checks; these only come first."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kernelwright.errors import UsageError


def problem(spec: str | None) -> None:
    """A problem file, or a bundled problem's name (kernelbench.bundled reads files only: light)."""
    if spec is None:
        return
    from kernelbench.bundled import resolve_problem

    resolve_problem(spec)  # raises ProblemError with the bundled names


def candidate(path: Path | None) -> None:
    if path is None:
        return
    if not path.exists():
        raise UsageError(f"{path}: no such candidate file")
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give one candidate .py file")


def folder(path: Path | None, what: str) -> None:
    if path is not None and not path.is_dir():
        raise UsageError(f"{path}: not a folder of {what}" if path.exists() else f"{path}: no such file or folder")


def exists(path: Path | None) -> None:
    if path is not None and not path.exists():
        raise UsageError(f"{path}: no such file or folder")


def choice(value: str, choices: Iterable[str], flag: str) -> None:
    options = list(choices)
    if value not in options:
        raise UsageError(f"{flag} {value!r}: choose one of {', '.join(options)}")


def buckets(texts: list[str] | None) -> None:
    """`export-op --bucket`: the syntax (the names are checked against the problem by the service)."""
    from kernelwright.bucket_spec import parse_buckets

    parse_buckets(texts)


def dataset_format(kind: str) -> None:
    from rewards.datasets import BUILDERS  # pure functions, nothing heavy

    choice(kind, BUILDERS, "--format")
