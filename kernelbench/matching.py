"""Match solution files (another system's kernels, one per problem) to problems."""

from __future__ import annotations

from pathlib import Path

from kernelbench.problem import Problem


def match_solution(problems: list[Problem], solution: Path, root: Path) -> Problem | None:
    """`levelN/<id>_<Name>.py` matches by key; a bare `<id>_<Name>.py` or `<Name>.py` when only one fits."""
    relative = solution.relative_to(root).with_suffix("").as_posix().lower()
    by_key = [p for p in problems if p.key.lower() == relative]
    if by_key:
        return by_key[0]
    stem = solution.stem.lower()
    by_stem = [p for p in problems if stem in (f"{p.problem_id}_{p.name}".lower(), p.name.lower())]
    return by_stem[0] if len(by_stem) == 1 else None


def solutions_by_problem(problems: list[Problem], root: Path) -> dict[str, Path]:
    """problem key -> solution file, for every `.py` under `root` that matches a problem."""
    found: dict[str, Path] = {}
    for file in sorted(root.rglob("*.py")):
        problem = match_solution(problems, file, root)
        if problem is not None:
            found.setdefault(problem.key, file)
    return found
