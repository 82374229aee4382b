"""Shared fixtures: an isolated kernelwright home per test session, a shared build cache, device markers."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# A user's results never reach the suite (its home is set per session). The machine-wide locks (compile slots,
# the CPU timing lock, in the temporary folder) stay shared with the user's commands on purpose: a CPU timing
# freezes every other kernelwright process's builds and timed children by their cgroups, machine-wide, so two
# timings under two different locks could freeze each other's children (a user's `eval --self-check` run beside
# the suite timed out after 7 minutes while the suite had a lock folder of its own, most likely from this).
for _variable in ("KERNELWRIGHT_HOME", "KERNELWRIGHT_DB", "KERNELWRIGHT_PRICES", "KERNELWRIGHT_BUILD_CACHE"):
    os.environ.pop(_variable, None)  # the user's results never reach the suite (its home is set per session)

# the test-only switch that lets a test turn the static policy off (harness/policy.py): the runtime must contain
# what the static policy would have stopped
os.environ["KERNELWRIGHT_TEST_STATIC_OFF"] = "1"

REPO = Path(__file__).resolve().parent.parent
BUNDLED = REPO / "kernelbench" / "bundled"
CPU_CANDIDATES = BUNDLED / "candidates" / "cpu"
CUDA_CANDIDATES = BUNDLED / "candidates" / "cuda"
RELU_CANDIDATE = CPU_CANDIDATES / "level1" / "1_ReLU.py"
RELU_FULL_HEADER = REPO / "tests" / "fixtures" / "relu_extension_h.py"  # the same ReLU on torch/extension.h

# The shape of KernelBench level 1's biggest elementwise problems: 4096 x 393216 floats = 6 GiB per tensor.
HUGE_ELEMENTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
"""


def _has_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH")
    gpu, nvcc = _has_gpu(), shutil.which("nvcc") is not None
    for item in items:
        if "gpu" in item.keywords and not gpu:
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and not nvcc:
            item.add_marker(no_nvcc)


@pytest.fixture(autouse=True, scope="session")
def kernelwright_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Databases and scratch folders go to a temporary home, and the per-user data folder (the home of a command
    run without KERNELWRIGHT_HOME) to a temporary one too: the suite never writes into the user's real results.
    Builds go to the repository's git-ignored runs/builds, kept between test runs, so that an extension compiled
    once (about 40 s here) is reused by every test that needs the same kernel."""
    home = tmp_path_factory.mktemp("kw-home")
    patch = pytest.MonkeyPatch()
    patch.setenv("KERNELWRIGHT_HOME", str(home))
    data = tmp_path_factory.mktemp("xdg-data")
    patch.setenv("XDG_DATA_HOME", str(data))
    from harness.paths import default_home

    assert default_home().is_relative_to(data), "the per-user folder must move under XDG_DATA_HOME (Linux)"
    patch.setenv("KERNELWRIGHT_BUILD_CACHE", str(REPO / "runs" / "builds"))
    patch.delenv("KERNELWRIGHT_DB", raising=False)
    yield home
    patch.undo()


@pytest.fixture(autouse=True)
def one_test_expects_few_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """An executor tells the process to expect many builds (a header from the first cold build): per test."""
    import threading

    from harness.compilation import pch

    monkeypatch.setattr(pch, "_many_builds", threading.Event())


def compilers_under(folder: Path) -> list[str]:
    """Build processes (ninja, compiler drivers, cc1plus) working inside `folder`: other builds on the machine
    (a parallel test run) do not count."""
    import psutil

    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if proc.info["name"] in ("ninja", "cc1plus", "c++", "g++", "gcc", "nvcc") and \
                    Path(proc.cwd()).is_relative_to(folder):
                found.append(f"{proc.pid} {proc.info['name']}")
        except (psutil.Error, OSError):
            continue
    return found


def relu_variant(forward_body: str, prelude: str = "") -> str:
    """A candidate built from the bundled ReLU kernel (same C++ source, so its build is cached) whose
    Python `forward` body is replaced: one compile serves many verdict tests."""
    source = RELU_CANDIDATE.read_text()
    head, _, _ = source.partition("class ModelNew")
    body = "\n".join("        " + line for line in forward_body.strip().splitlines())
    return (head + prelude + "\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n" + body + "\n")


def tail_dropping_relu() -> str:
    """The bundled ReLU candidate handling 8 elements at a time and never writing the rest (issue 35): right at
    the bundled shape (a multiple of 8), wrong at any other size."""
    source = RELU_CANDIDATE.read_text()
    assert _TAIL_LOOP in source
    return source.replace(_TAIL_LOOP, _EIGHT_AT_A_TIME)


_TAIL_LOOP = """    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    }"""
_EIGHT_AT_A_TIME = """    const int64_t body = n - n % 8;  // the tail is never written
    #pragma omp parallel for
    for (int64_t i = 0; i < body; i += 8) {
        for (int64_t j = i; j < i + 8; ++j) {
            dst[j] = src[j] > 0.0f ? src[j] : 0.0f;
        }
    }"""
