"""The sweep's baselines, eager and torch.compile, are timed by the candidates' own protocol: each in its own reference
process, alternating batches on the parent's clock, process sets, every compiled call checked (harness/paired_timing.py
`time_both`), so "vs torch.compile" is measured exactly as the speedup beside it. Before, a baseline child timed both on
its own clock with another call-count formula."""

from __future__ import annotations

import pytest

from harness.policy import EvalPolicy
from harness.execution.baseline import measure_baselines, time_references
from kernelbench.bundled import find_bundled
from kernelbench.problem import Problem

FAST = EvalPolicy(timing_budget_s=0.3, process_pairs=2)

# The child loads the problem as `kernelwright_problem` (the parent as `kernelwright_problem_N`): there, and only
# there, torch.compile fails as it does on a machine without a working compiler.
NO_COMPILE = '''

if __name__ == "kernelwright_problem":
    def _no_compile(*args, **kwargs):
        raise RuntimeError("no C++ compiler on this machine (the test's stand-in)")

    torch.compile = _no_compile
'''


@pytest.mark.slow
def test_baselines_come_from_the_parent_clock() -> None:
    measured = measure_baselines(find_bundled("relu"), "cpu", FAST)
    assert not [k for k in measured if k.endswith("error")], measured
    assert measured["eager_ms"] > 0 and measured["compile_ms"] > 0
    timing = measured["timing"]
    assert timing["protocol"].startswith("parent clock") and timing["clock"].startswith("parent perf_counter_ns")
    assert timing["process_sets"] == FAST.process_pairs and timing["timed_outputs_checked"] > 0
    low, high = measured["compile_speedup_ci"]
    assert low <= measured["compile_speedup"] <= high
    assert timing["noise_floor_ci"] is not None  # the eager copy ran in the same rotation


@pytest.mark.slow
def test_a_torch_compile_failure_is_recorded_not_raised() -> None:
    relu = find_bundled("relu")
    problem = Problem(name="relu_no_compile", source=relu.source.rstrip() + "\n" + NO_COMPILE)
    measured = measure_baselines(problem, "cpu", FAST)
    assert "compile_ms" not in measured
    assert "torch.compile failed" in measured["compile_error"] and "no C++ compiler" in measured["compile_error"]
    assert measured["eager_ms"] > 0  # still timed, by the same protocol: eager against a second eager process
    assert measured["timing"]["clock"].startswith("parent perf_counter_ns")


@pytest.mark.slow
def test_the_reference_against_itself_reads_one_inside_its_interval() -> None:
    paired = time_references(find_bundled("relu"), "cpu", FAST, compiled=False)
    assert paired.error is None and paired.reading is not None
    low, high = paired.reading.interval
    assert low <= 1.0 <= high, (paired.reading.speedup, paired.reading.interval, paired.reading.precision)
    assert low <= paired.reading.speedup <= high
