"""The bundled problem set: CPU-sized KernelBench-format problems with one honest CPU kernel each."""

from __future__ import annotations

from pathlib import Path

from kernelbench.problem import Problem, ProblemError, load_problem, load_problems

BUNDLED_ROOT = Path(__file__).parent / "bundled"
PROBLEMS_ROOT = BUNDLED_ROOT / "problems"
CANDIDATES_ROOT = BUNDLED_ROOT / "candidates"
TUNABLE_ROOT = BUNDLED_ROOT / "tunable"  # kernels that declare TUNE (agent/search/tunables.py)


def bundled_problems() -> list[Problem]:
    return load_problems(PROBLEMS_ROOT)


def _matches(problem: Problem, wanted: str) -> bool:
    wanted = wanted.lower().removesuffix(".py")
    names = {problem.name.lower(), problem.key.lower(), f"{problem.problem_id}_{problem.name}".lower()}
    return wanted in names


def find_bundled(name: str) -> Problem:
    """A bundled problem by name (`ReLU`), file stem (`1_ReLU`) or key (`level1/1_ReLU`), case-insensitive."""
    found = [p for p in bundled_problems() if _matches(p, name)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        keys = ", ".join(p.key for p in found)
        raise ProblemError(f"{name!r} matches several bundled problems ({keys}); use the full key")
    names = ", ".join(p.key for p in bundled_problems())
    raise ProblemError(f"{name!r} is neither a problem file nor a bundled problem. Bundled: {names}")


def bundled_candidate(problem: Problem, device: str = "cpu") -> Path:
    """The honest reference kernel shipped for a bundled problem."""
    path = CANDIDATES_ROOT / device / f"level{problem.level}" / f"{problem.problem_id}_{problem.name}.py"
    if not path.is_file():
        raise ProblemError(f"no bundled {device} candidate for {problem.key}")
    return path


def bundled_tunable(problem: Problem, device: str = "cpu") -> Path:
    """A bundled kernel that declares tunable constants (TUNE), for the tuning sub-loop's demo and benchmark."""
    path = TUNABLE_ROOT / device / f"level{problem.level}" / f"{problem.problem_id}_{problem.name}.py"
    if not path.is_file():
        raise ProblemError(f"no bundled tunable {device} kernel for {problem.key}")
    return path


def resolve_problem(spec: str) -> Problem:
    """A path to a problem file, or the name of a bundled problem."""
    path = Path(spec)
    if path.exists():
        if path.is_dir():
            raise ProblemError(f"{spec} is a folder; give one problem file (or use `problems list {spec}`)")
        return load_problem(path)
    return find_bundled(spec)
