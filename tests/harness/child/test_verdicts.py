"""Every verdict on the CPU device, with real compiled kernels. Most candidates reuse the bundled ReLU
kernel's C++ source (so one cached build serves them all) and misbehave in Python around it."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Verdict
from kernelbench.bundled import find_bundled
from tests.conftest import RELU_CANDIDATE, relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
# containment must hold even for code the static policy would have stopped: these tests switch it off
FAST = EvalPolicy(timing_budget_s=0.2, static_policy="off")


def _evaluate(source: str, problem=RELU, **policy: object):
    return evaluate(problem, source, "cpu", FAST.model_copy(update=policy))


def test_honest_kernel_is_accepted_with_a_speedup_and_its_uncertainty() -> None:
    evaluation = _evaluate(RELU_CANDIDATE.read_text())
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert len(evaluation.trials) == EvalPolicy().trials and all(t.passed for t in evaluation.trials)
    assert len({t.seed for t in evaluation.trials}) == EvalPolicy().trials  # fresh seed per trial
    assert [t.distribution for t in evaluation.trials] == ["default", "signed_uniform", "heavy_tailed", "spiky",
                                                          "large", "block_scaled", "ramp", "sparse"]
    low, high = evaluation.speedup_ci
    assert low <= evaluation.speedup <= high
    assert len(evaluation.ref_timing.samples_ms) == len(evaluation.candidate_timing.samples_ms) >= 10
    assert evaluation.device_info["threads"] == 1 and evaluation.device_info["torch"]


def test_wrong_kernel_is_incorrect_with_where_it_differs() -> None:
    evaluation = _evaluate(RELU_CANDIDATE.read_text(), problem=find_bundled("gelu"))
    assert evaluation.verdict is Verdict.INCORRECT
    assert "outside atol=0.0001 rtol=0.0001" in evaluation.reasons[0] and "expected" in evaluation.reasons[0]
    assert evaluation.speedup is None  # an incorrect kernel is never timed into a speedup


def test_exception_from_the_kernel_is_a_runtime_error() -> None:
    evaluation = _evaluate(relu_variant("return relu_ext.relu_forward(x.double())"))
    assert evaluation.verdict is Verdict.RUNTIME_ERROR
    assert "expects a float CPU tensor" in evaluation.reasons[0]


def test_wrong_forward_signature_is_a_runtime_error() -> None:
    source = relu_variant("return relu_ext.relu_forward(x)").replace("def forward(self, x):",
                                                                       "def forward(self, x, y):")
    evaluation = _evaluate(source)
    assert evaluation.verdict is Verdict.RUNTIME_ERROR and "forward() missing" in evaluation.reasons[0]


def test_infinite_loop_is_a_timeout_and_the_tree_is_killed() -> None:
    evaluation = _evaluate(relu_variant("while True:\n    pass"), timeout_s=15)
    assert evaluation.verdict is Verdict.TIMEOUT
    assert "correctness trials" in evaluation.reasons[0]
    assert evaluation.phase_seconds["child"] < 25


def test_segfault_is_a_crash_naming_the_signal() -> None:
    evaluation = _evaluate(relu_variant("import ctypes\nctypes.string_at(0)\nreturn x"))
    assert evaluation.verdict is Verdict.CRASH
    assert "SIGSEGV" in evaluation.reasons[0]


def test_memory_bomb_is_stopped() -> None:
    bomb = "hoard = []\nwhile True:\n    hoard.append(torch.ones(2 ** 26))\nreturn x"
    evaluation = _evaluate(relu_variant(bomb), memory_limit_mb=3000)
    assert evaluation.verdict in (Verdict.CRASH, Verdict.RUNTIME_ERROR)
    assert "memory" in evaluation.reasons[0].lower()


def test_candidate_cannot_see_secrets_of_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-must-not-leak")
    spy = ("import os\nleaked = [k for k, v in os.environ.items() if 'must-not-leak' in v]\n"
           "return x if leaked else relu_ext.relu_forward(x)")  # a leak would show up as a wrong answer
    evaluation = _evaluate(relu_variant(spy))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons


def test_candidate_has_no_network() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    probe = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
             "    return x\nexcept OSError:\n    return relu_ext.relu_forward(x)")
    evaluation = _evaluate(relu_variant(probe))
    server.close()
    if not evaluation.isolation["network"].startswith("isolated"):
        pytest.skip(f"network namespaces unavailable here: {evaluation.isolation['network']}")
    assert evaluation.verdict is Verdict.ACCEPTED and not accepted


def test_candidate_without_model_new_or_without_kernel_is_rejected_before_running() -> None:
    no_class = _evaluate("import torch\n")
    assert no_class.verdict is Verdict.REJECTED and "ModelNew" in no_class.reasons[0]
    plain = _evaluate("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                      "        return torch.relu(x)\n")
    assert plain.verdict is Verdict.REJECTED and "no custom kernel" in plain.reasons[0]
    assert "child" not in plain.phase_seconds  # nothing was spawned


def test_python_syntax_error_is_a_compile_error() -> None:
    evaluation = _evaluate("class ModelNew(\n")
    assert evaluation.verdict is Verdict.COMPILE_ERROR and "syntax error" in evaluation.reasons[0]


def test_cpp_error_is_a_compile_error_with_the_compiler_log() -> None:
    broken = RELU_CANDIDATE.read_text().replace("Tensor out = torch::stable::empty_like(input);",
                                                "Tensor out = torch::stable::empty_like(undeclared_tensor);")
    evaluation = _evaluate(broken)
    assert evaluation.verdict is Verdict.COMPILE_ERROR
    assert "undeclared_tensor" in evaluation.reasons[0] and "error" in evaluation.reasons[0]


def test_forward_that_raises_while_timed_is_a_runtime_error() -> None:
    """Correct while checked, then it raises in a timed batch: the candidate's failure, named as such."""
    source = relu_variant("self.calls = getattr(self, 'calls', 0) + 1\nif self.calls > 14:\n"
                          "    raise RuntimeError('kernel launch failed')\nreturn relu_ext.relu_forward(x)")
    evaluation = _evaluate(source)
    assert evaluation.verdict is Verdict.RUNTIME_ERROR, evaluation.reasons
    assert "kernel launch failed" in evaluation.reasons[0]


def test_a_candidate_that_asks_for_build_after_build_gets_one_clear_verdict() -> None:
    """Its first build is the bundled ReLU (cached); the second distinct source is past max_builds=1, refused
    before any compiler runs, and the verdict names the limit (whatever the candidate made of the refusal)."""
    source = relu_variant("return relu_ext.relu_forward(x)", prelude=(
        "for k in range(40):\n"
        "    try:\n"
        "        load_inline(name=f'more_{k}', cpp_sources=f'int f{k}() {{ return {k}; }}', functions=[f'f{k}'])\n"
        "    except Exception:\n"
        "        pass"))
    evaluation = evaluate(RELU, source, "cpu", EvalPolicy(timing_budget_s=0.1, static_policy="off", max_builds=1))
    assert evaluation.verdict is Verdict.REJECTED
    assert evaluation.reasons[0].startswith("[build-limit]") and "max_builds" in evaluation.reasons[0]
    assert len(evaluation.build["builds"]) == 1


def test_a_candidate_that_fills_its_scratch_folder_is_stopped_by_the_kernel_and_told_which_limit() -> None:
    """It writes 1 MB blocks to new files until something stops it (evading the static ban on open() by writing
    through pathlib): the tmpfs quota refuses the writes at scratch_limit_mb, never the disk or the memory limit."""
    source = relu_variant("return relu_ext.relu_forward(x)", prelude=(
        "import pathlib\nblock = b'x' * (1 << 20)\n"
        "for k in range(4096):\n"
        "    try:\n"
        "        pathlib.Path(f'spill_{k}.bin').write_bytes(block * 8)\n"
        "    except OSError:\n"
        "        break"))
    if os.geteuid() != 0:
        pytest.skip("no scratch quota here (kernelwright is not root)")
    evaluation = evaluate(RELU, source, "cpu", EvalPolicy(timing_budget_s=0.1, static_policy="off",
                                                           scratch_limit_mb=64))
    assert evaluation.isolation.get("scratch_quota_mb") == 64
    assert evaluation.verdict is Verdict.REJECTED
    assert evaluation.reasons[0].startswith("[scratch-limit]") and "64 MB" in evaluation.reasons[0]
    assert "memory limit" not in " ".join(evaluation.reasons)


def test_a_crash_report_shows_the_candidates_own_output_only() -> None:
    """What a crashed candidate printed reaches the judge; the harness's own start-up chatter (runpy's warning about
    the preloaded child program) does not (issue 34 item 8)."""
    source = relu_variant("print('printed by the candidate', flush=True)\nimport os\nos._exit(3)")
    evaluation = evaluate(find_bundled("relu"), source, "cpu", EvalPolicy(timing_budget_s=0.1, static_policy="off"))
    assert evaluation.verdict is Verdict.CRASH
    last = next(r for r in evaluation.reasons if r.startswith("last output:"))
    assert last == "last output:\nprinted by the candidate", last
