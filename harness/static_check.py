"""Static checks of a candidate before anything runs: it parses, defines ModelNew, and builds a kernel.

This is the foundation's cheap gate; the full adversarial policy (fallbacks, streams, monkeypatching...)
extends `check_candidate` with more findings of the same shape.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from harness.policy import EvalPolicy

_BUILD_CALLS = {"load_inline", "load"}


@dataclass
class StaticReport:
    """Findings: `errors` decide the verdict; `notes` are reported without failing the candidate."""

    verdict: str | None = None  # "compile_error" or "rejected" when the candidate cannot go further
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _builds_a_kernel(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _BUILD_CALLS:
                return True
    return False


def _model_new(tree: ast.Module) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return node
    return None


def check_candidate(source: str, policy: EvalPolicy) -> StaticReport:
    report = StaticReport()
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        report.verdict = "compile_error"
        report.errors.append(f"Python syntax error on line {exc.lineno}: {exc.msg}")
        return report
    model_new = _model_new(tree)
    if model_new is None:
        report.verdict = "rejected"
        report.errors.append("no `class ModelNew` at module level: a candidate must define ModelNew "
                             "(KernelBench format) with the same constructor and forward signature as Model")
        return report
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model_new.body):
        report.notes.append("ModelNew defines no forward() of its own")
    if not _builds_a_kernel(tree):
        message = ("no custom kernel: the candidate never calls torch.utils.cpp_extension.load_inline (or load), "
                   "so forward() can only be PyTorch's own operators")
        if policy.require_custom_kernel:
            report.verdict = "rejected"
            report.errors.append(message)
        else:
            report.notes.append(message)
    return report
