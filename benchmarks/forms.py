"""Candidates chosen by the property a benchmark measures, not by which bundled file happens to use which form.

A *full-form* candidate builds against `torch/extension.h` (load_inline's implicit headers, or the header named in
its source): the form a precompiled header speeds up. A *light* one uses torch's stable-ABI headers only
(`no_implicit_headers=True`, no `torch/extension.h`): it builds in seconds and no precompiled header applies.
"""

from __future__ import annotations

import re
from pathlib import Path

from kernelbench.bundled import bundled_candidate
from kernelbench.problem import Problem, ProblemError

REPO = Path(__file__).resolve().parents[1]
FULL_RELU = REPO / "tests" / "fixtures" / "relu_extension_h.py"  # ReLU on torch/extension.h
LIGHT_RELU = REPO / "agent" / "examples" / "light_cpu.py"  # the same ReLU on the stable ABI headers
_NO_IMPLICIT = re.compile(r"no_implicit_headers\s*=\s*True")
_INCLUDES_FULL = re.compile(r'#\s*include\s*[<"]torch/extension\.h[>"]')


def form(source: str) -> str:
    """`full` where the build reads torch/extension.h, else `light`."""
    return "light" if _NO_IMPLICIT.search(source) and not _INCLUDES_FULL.search(source) else "full"


def candidate_of_form(problem: Problem, wanted: str) -> Path:
    """A CPU candidate for `problem` in form `wanted`: the bundled one where it has that form, else the ReLU
    fixtures above; a clear error where the problem has none."""
    try:
        bundled = bundled_candidate(problem)
        if form(bundled.read_text()) == wanted:
            return bundled
    except ProblemError:
        pass
    if problem.name.lower() == "relu":
        return FULL_RELU if wanted == "full" else LIGHT_RELU
    raise SystemExit(f"no {wanted}-form CPU candidate for {problem.key}: the {wanted}-form figures need one "
                     "(ReLU has both forms)")
