"""KernelBench-format problems: loading files and folders, fingerprints, size reduction, the bundled set."""

from kernelbench.problem import Problem, ProblemError, load_problem, load_problems

__all__ = ["Problem", "ProblemError", "load_problem", "load_problems"]
