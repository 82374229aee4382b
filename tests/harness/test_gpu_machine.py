"""CPU evaluations as a GPU machine runs them (where the CUDA build of torch and its driver map gigabytes of
address space and any CUDA query initialises the driver), checked here on the CPU."""

from __future__ import annotations

import uuid

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from harness.isolation.cgroups import ControlGroup
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE, relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
POLICY = EvalPolicy(timing_budget_s=0.2, skip_timing=True, memory_limit_mb=2048)


def test_a_cpu_child_sees_no_gpu_and_makes_no_cuda_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every CUDA query in the child raises (a test-only switch): the harness makes none, and the candidate
    is told there is no GPU (it would get one from torch.cuda.is_available() otherwise)."""
    monkeypatch.setenv("KERNELWRIGHT_TEST_TRAP_CUDA", "1")
    source = relu_variant("if os.environ.get('CUDA_VISIBLE_DEVICES') != '':\n    return torch.zeros_like(x)\n"
                          "return relu_ext.relu_forward(x)", prelude="import os")
    evaluation = evaluate(RELU, source, "cpu", POLICY.model_copy(update={"static_policy": "off"}))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons


def test_the_cpu_path_leaves_room_beside_gigabytes_of_mapped_address_space() -> None:
    """A process that has mapped more address space than its memory limit (as a CUDA build of torch does on a
    GPU machine) still loads its extension: memory is the cgroup's to limit, or the rlimit is an allowance on top
    of what was mapped. An absolute RLIMIT_AS failed every CPU evaluation there ('failed to map segment')."""
    group = ControlGroup.create(uuid.uuid4().hex, 64, 8)
    has_memory_cgroup = group.limits_memory()
    group.remove()
    if not has_memory_cgroup:
        pytest.skip("no memory cgroup here: the allowance above what is mapped applies after the imports")
    reserve = ("import ctypes\n_libc = ctypes.CDLL(None)\n_libc.mmap.restype = ctypes.c_void_p\n"
               "_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, "
               "ctypes.c_long]\n"  # 3 GB of address space, PROT_NONE, MAP_PRIVATE|ANONYMOUS|NORESERVE, as a driver does
               "assert _libc.mmap(None, 3 << 30, 0, 0x22 | 0x4000, -1, 0) != ctypes.c_void_p(-1).value\n")
    source = reserve + RELU_CANDIDATE.read_text()
    evaluation = evaluate(RELU, source, "cpu", POLICY.model_copy(update={"static_policy": "off"}))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
