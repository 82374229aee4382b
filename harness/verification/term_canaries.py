"""Term canaries: the reference with one of its summed terms dropped. Where `x + 1e-5 * conv(x)` is checked at the
problem's own parameters, the conv's contribution is under the tolerance, so a kernel that skips it (and its cost)
passes every trial: correct here, wrong for any caller whose parameters make the term count. Each `+`/`-` of two
computed tensors in the reference's traced forward is tried without each of its terms; a term whose absence still
passes every trial makes the problem degenerate for it (no speedup is reported), like the trivial canaries.
Where the reference is slow, canaries.py hands them the same shrunk copy the ablation checks; what they cannot
trace or afford, the ablation (which needs no tracing and covers every term) still checks.
"""

from __future__ import annotations

import operator
import time
from typing import Any

from harness.policy import EvalPolicy
from harness.values.tensors import cloned, portable, to_device
from harness.verification.clear_failure import passes
from harness.verification.reference import ReferenceRun, reference_threads

_SUMS = {operator.add, operator.sub, operator.iadd, operator.isub}
_SUM_METHODS = {"add", "sub", "add_", "sub_"}
_MOST_TERMS = 12
_BUDGET_S = 10.0  # of reference forwards, for all the terms together


def negligible_terms(reference: ReferenceRun, policy: EvalPolicy) -> list[str]:
    """`without `<line>`` for each term of the reference whose absence passes every trial (empty where the
    reference cannot be traced, or its forward is too slow to try every term within the budget)."""
    traced = _traced(reference.model)
    if traced is None:
        return []
    terms = _terms(traced)[:_MOST_TERMS]
    if not terms:
        return []
    device = next((p.device.type for p in reference.model.parameters()), "cpu")
    with reference_threads(policy.cpu_threads):  # as the reference's own computations: one at a time, few threads
        started = time.perf_counter()
        _run(traced, reference.trial_inputs[0], device)
        if (time.perf_counter() - started) * len(terms) * len(reference.trial_inputs) > _BUDGET_S:
            return []
        return [f"the reference without `{line}`" for node, arg, line in terms
                if _passes_without(traced, node, arg, reference, policy, device)]


def _traced(model: Any) -> Any:
    import torch.fx

    if model is None:
        return None
    try:
        return torch.fx.symbolic_trace(model)
    except Exception:  # data-dependent control flow and friends: no term canaries for this problem
        return None


def _terms(traced: Any) -> list[tuple[str, str, str]]:
    """(sum node, term node, the term's line of code) for every sum of two computed values."""
    lines = {line.strip().split(" = ")[0]: line.split(";")[0].strip() for line in traced.code.splitlines()
             if " = " in line}
    found = []
    for node in traced.graph.nodes:
        summed = (node.op == "call_function" and node.target in _SUMS) or \
            (node.op == "call_method" and node.target in _SUM_METHODS)
        args = [a for a in node.args[:2] if hasattr(a, "op")]
        if not summed or len(args) != 2:
            continue
        for arg in args:
            if arg.op not in ("placeholder", "get_attr"):  # a computed term, not an input or a parameter alone
                found.append((node.name, arg.name, lines.get(arg.name, arg.name)[:120]))
    return found


def _without(traced: Any, node_name: str, arg_name: str) -> Any:
    """A copy of the traced module with `arg_name` replaced by zeros where `node_name` sums it."""
    import copy

    import torch

    graph = copy.deepcopy(traced.graph)
    node = next(n for n in graph.nodes if n.name == node_name)
    arg = next(n for n in graph.nodes if n.name == arg_name)
    with graph.inserting_before(node):
        zeros = graph.call_function(torch.zeros_like, (arg,))
    node.args = tuple(zeros if a is arg else a for a in node.args)
    return torch.fx.GraphModule(traced, graph)


def _run(module: Any, inputs: list[Any], device: str) -> Any:
    import torch

    with torch.no_grad():
        return portable(module(*to_device(cloned(inputs), device)))


def _passes_without(traced: Any, node_name: str, arg_name: str, reference: ReferenceRun, policy: EvalPolicy,
                    device: str) -> bool:
    try:
        dropped = _without(traced, node_name, arg_name)
        for seed, inputs, expected in zip(reference.trial_seeds, reference.trial_inputs, reference.outputs):
            if not passes(seed, expected, _run(dropped, inputs, device), policy):
                return False
    except Exception:  # a term whose absence breaks the shapes: it counts
        return False
    return True
