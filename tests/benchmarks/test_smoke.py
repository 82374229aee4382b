"""Each benchmark's smoke mode runs to its report, so a benchmark that breaks fails the suite (issue 37). Only that
it runs is asserted: exit 0 and its report's heading; its figures are never asserted (a smoke run's mean nothing)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, RELU_CANDIDATE, RELU_FULL_HEADER

BENCHMARKS = REPO / "benchmarks"


def _smoke(script: str, *args: str, timeout: float = 300) -> str:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # ninja
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=env)
    assert done.returncode == 0, f"{script} {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n" \
                                 f"{done.stderr[-3000:]}"
    return done.stdout


def test_benchmarks_pick_candidates_by_form() -> None:
    spec = importlib.util.spec_from_file_location("bench_forms", BENCHMARKS / "forms.py")
    forms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(forms)
    from kernelbench.bundled import find_bundled

    assert forms.form(RELU_FULL_HEADER.read_text()) == "full"
    assert forms.form(RELU_CANDIDATE.read_text()) == "light"  # its comment names torch/extension.h: not an include
    relu = find_bundled("relu")
    assert forms.form(forms.candidate_of_form(relu, "full").read_text()) == "full"
    assert forms.form(forms.candidate_of_form(relu, "light").read_text()) == "light"


def test_cuda_l1_static_smoke() -> None:
    assert "# The static policy over published kernels" in _smoke("cuda_l1_static.py", "--smoke")


@pytest.mark.slow
def test_bench_eval_smoke() -> None:
    out = _smoke("bench_eval.py", "--smoke")
    assert "# kernelwright build and evaluation speed" in out and "cached evaluation" in out


@pytest.mark.slow
def test_bench_sweep_smoke() -> None:
    out = _smoke("bench_sweep.py", "--smoke")
    assert "# kernelwright sweep throughput" in out and "problems/hour" in out


@pytest.mark.slow
def test_bench_fidelity_smoke() -> None:
    out = _smoke("bench_fidelity.py", "--device", "cpu", "--smoke")
    assert "# Timing fidelity" in out and "| ReLU |" in out


@pytest.mark.slow
def test_bench_hardening_smoke() -> None:
    out = _smoke("bench_hardening.py", "--smoke")
    assert "# What the hardening costs" in out and "hardened / plain" in out


@pytest.mark.slow
def test_gpu_check_smoke_on_the_cpu() -> None:
    out = _smoke("gpu_check.py", "--device", "cpu", "--smoke")
    assert "# kernelwright gpu-check" in out and "| ReLU |" in out and "gpu-check took" in out


@pytest.mark.slow
def test_bench_search_smoke() -> None:
    out = _smoke("bench_search.py", "--smoke", timeout=1800)
    assert "# kernelwright search" in out and "(b) simulated coder" in out and "(c) seconds per candidate" in out
