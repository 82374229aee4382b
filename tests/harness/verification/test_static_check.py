"""The static policy, read from the AST: what it rejects, what it only reports, and what it leaves alone."""

from __future__ import annotations

import pytest

from harness.policy import EvalPolicy
from harness.records import Check
from harness.verification.static_check import check_candidate
from tests.conftest import CPU_CANDIDATES, CUDA_CANDIDATES, RELU_CANDIDATE, relu_variant

RELU_SOURCE = RELU_CANDIDATE.read_text()

DEFAULT, STRICT = EvalPolicy(), EvalPolicy(static_policy="strict")


def _checks(source: str, policy: EvalPolicy = DEFAULT) -> set[str]:
    return {f.check for f in check_candidate(source, policy).findings if f.fatal}


def test_syntax_error_is_a_compile_error_with_the_line() -> None:
    report = check_candidate("class ModelNew(:\n    pass\n", DEFAULT)
    assert report.verdict == "compile_error"
    assert "line 1" in report.errors[0]


def test_missing_model_new_is_rejected() -> None:
    report = check_candidate("import torch\nclass Model: pass\n", DEFAULT)
    assert report.verdict == "rejected" and "ModelNew" in report.errors[0]


def test_plain_torch_candidate_is_rejected_when_a_kernel_is_required() -> None:
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert check_candidate(source, DEFAULT).verdict == "rejected"
    relaxed = check_candidate(source, EvalPolicy(require_custom_kernel=False))
    assert relaxed.verdict is None and any("no custom kernel" in note for note in relaxed.notes)


@pytest.mark.parametrize("path", sorted(CPU_CANDIDATES.glob("level*/*.py")) + sorted(CUDA_CANDIDATES.glob("level*/*.py")),
                         ids=lambda p: p.stem)
def test_honest_bundled_kernels_pass_even_strict(path) -> None:
    assert check_candidate(path.read_text(), STRICT).verdict is None


def test_comments_docstrings_and_empty_try_are_not_findings() -> None:
    source = relu_variant('"""We never use std::thread or cudaStreamCreate here."""\n'
                          "# import threading would be bad; pass\n"
                          "try:\n    y = relu_ext.relu_forward(x)\nexcept RuntimeError:\n    raise\nreturn y")
    assert check_candidate(source, STRICT).verdict is None


# Each exploit mechanism below is caught before anything runs, and the finding names the check.
EXPLOITS = {
    "inherits-reference": ("class Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
                           "class ModelNew(Model):\n    pass\n", "no-kernel"),
    "try-fallback": (relu_variant("try:\n    return relu_ext.relu_forward(x)\nexcept Exception:\n"
                                  "    return torch.relu(x)"), "try-fallback"),
    "python-thread": (relu_variant("import threading\nout = torch.empty_like(x)\nreturn out"), "threads"),
    "subprocess": (relu_variant("import subprocess\nreturn relu_ext.relu_forward(x)"), "subprocesses"),
    "timer-patch": (relu_variant("return relu_ext.relu_forward(x)", "import time\ntime.perf_counter = lambda: 0.0"),
                    "monkeypatch"),
    "sync-patch": (relu_variant("return relu_ext.relu_forward(x)",
                                "torch.cuda.synchronize = lambda *a, **k: None"), "monkeypatch"),
    "reference-sabotage": (relu_variant("return relu_ext.relu_forward(x)",
                                        "_slow = torch.relu\ntorch.relu = lambda t: _slow(t.clone().clone())"),
                           "monkeypatch"),
    "frame-introspection": (relu_variant("import sys\nreturn sys._getframe(1).f_locals['expected']"),
                            "forbidden-api"),
    "census-detection": (relu_variant("if torch._C._len_torch_dispatch_stack():\n    return relu_ext.relu_forward(x)\n"
                                      "return relu_ext.relu_forward(torch.relu(x))"), "forbidden-api"),
    "closure-by-name": (relu_variant("switch = getattr(relu_ext.relu_forward, '__closure__')[0]\n"
                                     "return relu_ext.relu_forward(x)"), "forbidden-api"),
    "dispatch-mode-import": (relu_variant("from torch.utils._python_dispatch import _get_current_dispatch_mode\n"
                                          "return relu_ext.relu_forward(x)"), "forbidden-api"),
    "dispatch-disabled": (relu_variant("with torch._C._DisableTorchDispatch():\n    y = torch.relu(x)\n"
                                       "return relu_ext.relu_forward(y)"), "forbidden-api"),
    "torch-function-carrier": (relu_variant("return relu_ext.relu_forward(_Carrier(x))", prelude=(
        "class _Carrier:\n    def __init__(self, t):\n        self.t = t\n\n"
        "    @classmethod\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        return torch.relu(args[0].t)")), "forbidden-api"),
    "torch-function-mode": (relu_variant("with _Answer():\n    return relu_ext.relu_forward(x)", prelude=(
        "from torch.overrides import TorchFunctionMode\n\nclass _Answer(TorchFunctionMode):\n    pass")),
        "forbidden-api"),
    "python-impl-of-own-op": (relu_variant("return relu_ext.relu_forward(x)", prelude=(
        "_lib = torch.library.Library('kw_relu_cpu', 'IMPL')\n"
        "_lib.impl('relu_forward', lambda t: t.clamp(min=0), 'CPU')")), "forbidden-api"),
    "gc-scan": (relu_variant("import gc\nreturn [o for o in gc.get_objects() if torch.is_tensor(o)][0]"),
                "introspection"),
    "setattr-patch": (relu_variant("return relu_ext.relu_forward(x)",
                                   "setattr(torch.Tensor, 'clone', lambda self: self)"), "monkeypatching"),
    "env-read": (relu_variant("import os\nkey = os.environ.get('OPENAI_API_KEY')\nreturn relu_ext.relu_forward(x)"),
                 "forbidden-api"),
    "file-read": (relu_variant("return torch.load(open('/tmp/answers.pt', 'rb'))"), "file"),
    "socket": (relu_variant("import socket\nreturn relu_ext.relu_forward(x)"), "network"),
    "get-inputs-override": (relu_variant("return relu_ext.relu_forward(x)",
                                         "get_inputs = lambda: [torch.ones(16, 16384)]"), "problem-override"),
    "more-threads": (relu_variant("torch.set_num_threads(8)\nreturn relu_ext.relu_forward(x)"), "forbidden-api"),
    "harness-import": (relu_variant("import harness.child\nreturn relu_ext.relu_forward(x)"), "harness-alias"),
    "env-from-cpp-clone": (RELU_CANDIDATE.read_text().replace("Tensor input = torch::stable::contiguous(x);",
                                                               "Tensor input = torch::stable::contiguous(x); system(\"id\");"), "io"),
    "fast-math": (RELU_CANDIDATE.read_text().replace('"-O3", "-fopenmp"', '"-O3", "-ffast-math", "-fopenmp"'),
                  "fast-math"),
    "cpp-thread": (RELU_CANDIDATE.read_text().replace("#include <torch/csrc/stable/ops.h>",
                                                      "#include <torch/csrc/stable/ops.h>\n#include <thread>\n"
                                                      "static void later() { std::thread([]{}).detach(); }"),
                   "threads"),
    "side-stream": ((CUDA_CANDIDATES / "level1" / "1_ReLU.py").read_text().replace(
        "relu_kernel<<<blocks, threads>>>", "cudaStream_t s; cudaStreamCreate(&s);\n    relu_kernel<<<blocks, threads, 0, s>>>"),
        "streams"),
    "l2-persistence": ((CUDA_CANDIDATES / "level1" / "1_ReLU.py").read_text().replace(
        "const int threads = 256;", "cudaStreamAttrValue a; a.accessPolicyWindow.num_bytes = 1 << 20;\n"
        "    cudaStreamSetAttribute(at::cuda::getCurrentCUDAStream(), cudaStreamAttributeAccessPolicyWindow, &a);\n"
        "    const int threads = 256;"), "streams"),
    "cublas-stream": ((CUDA_CANDIDATES / "level1" / "1_ReLU.py").read_text().replace(
        "const int threads = 256;", "cublasSetStream(handle, side);\n    const int threads = 256;"), "streams"),
    "cpp-file-io": (RELU_CANDIDATE.read_text().replace("Tensor input = torch::stable::contiguous(x);",
                                                       "FILE* f = fopen(\"/tmp/leak\", \"w\");\n    Tensor input = torch::stable::contiguous(x);"),
                    "io"),
}


@pytest.mark.parametrize("name", sorted(EXPLOITS))
def test_exploit_is_rejected_statically_and_names_the_check(name: str) -> None:
    source, check = EXPLOITS[name]
    report = check_candidate(source, DEFAULT)
    assert report.verdict == "rejected", report.findings
    assert check in _checks(source), (check, report.errors)
    assert any(f"[{check}]" in error for error in report.errors)


def test_library_compute_is_reported_by_default_and_fatal_when_strict() -> None:
    fallback = relu_variant("return relu_ext.relu_forward(torch.nn.functional.gelu(x))")
    default = check_candidate(fallback, DEFAULT)
    assert default.verdict is None and any("[torch-compute]" in n for n in default.notes)
    assert check_candidate(fallback, STRICT).verdict == "rejected"
    cpp_fallback = RELU_CANDIDATE.read_text().replace("Tensor out = torch::stable::empty_like(input);",
                                                      "return torch::relu(input);\n    Tensor out = torch::stable::empty_like(input);")
    assert check_candidate(cpp_fallback, DEFAULT).verdict is None
    assert "torch-compute" in _checks(cpp_fallback, STRICT)


def test_precision_downcast_is_reported_by_default_and_fatal_when_strict() -> None:
    half = relu_variant("return relu_ext.relu_forward(x.half().float())")
    assert check_candidate(half, DEFAULT).verdict is None
    assert "precision" in _checks(half, STRICT)


@pytest.mark.parametrize("cpp, check", [
    ("static auto h = at::addGlobalCallback(at::RecordFunctionCallback(slow_down));", "profiler-hook"),
    ('PyRun_SimpleString("import harness");', "python-capi"),
    ("TORCH_LIBRARY_IMPL(aten, CPU, m) { m.impl(\"relu\", fake); }", "operator-override"),
    ('#include "/work/runs/builds/other/kernel.h"', "include"),
    ("posix_spawn(&pid, path, nullptr, nullptr, argv, envp);", "io"),
])
def test_cpp_routes_into_the_interpreter_and_the_reference_are_rejected(cpp: str, check: str) -> None:
    source = RELU_SOURCE.replace("#include <torch/csrc/stable/ops.h>", "#include <torch/csrc/stable/ops.h>\n" + cpp)
    report = check_candidate(source, EvalPolicy())
    assert report.verdict == "rejected" and any(f"[{check}]" in e for e in report.errors), report.errors


def test_python_aliases_of_the_problem_module_are_rejected() -> None:
    source = RELU_SOURCE + "\nimport sys\nP = sys.modules['kernelwright_problem']\n"
    assert any("[harness-alias]" in e for e in check_candidate(source, EvalPolicy()).errors)


def test_strict_counts_tensor_operators_as_pytorch_compute() -> None:
    source = RELU_SOURCE.replace("return relu_ext.relu_forward(x)", "return relu_ext.relu_forward(x) * x.sum()")
    assert any("[torch-compute]" in e for e in check_candidate(source, EvalPolicy(static_policy="strict")).errors)
    assert not check_candidate(source, EvalPolicy()).verdict  # only a note under default


# False alarms found on CUDA-L1's published H100 kernels (benchmarks/cuda_l1_static.py): each was rejected.
LEGITIMATE = {
    "cpp-clone": RELU_SOURCE.replace("Tensor input = torch::stable::contiguous(x);", "auto input = x.contiguous().clone();"),
    "source-written-for-load": relu_variant(
        "return relu_ext.relu_forward(x)",
        "with open('kernel_source.cpp', 'w') as handle:\n    handle.write('// the same source, for load()')"),
    "own-attribute-deleted": relu_variant("return relu_ext.relu_forward(x)").replace(
        "super().__init__()", "super().__init__()\n        self.spare = None\n        delattr(self, 'spare')"),
}


@pytest.mark.parametrize("name", sorted(LEGITIMATE))
def test_legitimate_code_that_looked_like_an_attack_passes(name: str) -> None:
    report = check_candidate(LEGITIMATE[name], STRICT)
    assert report.verdict is None, report.errors


def test_reading_a_file_is_still_rejected() -> None:
    assert "file" in _checks(relu_variant("return torch.load(open('answers.pt'))"))
    assert "file" in _checks(relu_variant("return torch.load(open('answers.pt', 'r+b'))"))


@pytest.mark.parametrize("setting, check", [
    ("torch.backends.cudnn.benchmark = True", "global-state"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "precision"),
    ("torch.set_float32_matmul_precision('high')", "precision"),
])
def test_backend_settings_are_reported_by_default_and_fatal_when_strict(setting: str, check: str) -> None:
    source = relu_variant("return relu_ext.relu_forward(x)", setting)
    default = check_candidate(source, DEFAULT)
    assert default.verdict is None and any(f"[{check}]" in note for note in default.notes), default.findings
    assert check in _checks(source, STRICT)


def test_a_candidates_own_registered_op_is_its_kernel_not_pytorch_compute() -> None:
    source = RELU_SOURCE.replace("#include <torch/csrc/stable/ops.h>",
                                 "#include <torch/csrc/stable/ops.h>\nTORCH_LIBRARY(kw_relu, m) { m.def(\"relu(Tensor x) -> Tensor\"); }")
    source = source.replace("return relu_ext.relu_forward(x)", "return torch.ops.kw_relu.relu(x)")
    assert check_candidate(source, STRICT).verdict is None
    foreign = source.replace("torch.ops.kw_relu.relu(x)", "torch.ops.aten.relu(x)")
    assert "torch-compute" in _checks(foreign, STRICT)


def test_fast_math_tells_the_coder_to_rebuild_without_the_flag() -> None:
    report = check_candidate(EXPLOITS["fast-math"][0], DEFAULT)
    assert any("build without the flag" in error for error in report.errors)


@pytest.mark.parametrize("body", [
    "key = x.data_ptr()\nif key not in self.seen:\n    self.seen[key] = relu_ext.relu_forward(x)\nreturn self.seen[key]",
    "return self.seen.setdefault(0, relu_ext.relu_forward(x)) if x.numpy().tobytes() in self.seen else relu_ext.relu_forward(x)",
])
def test_an_output_cache_keyed_on_the_inputs_is_reported_and_fatal_when_strict(body: str) -> None:
    source = relu_variant(body).replace("super().__init__()", "super().__init__()\n        self.seen = {}")
    default = check_candidate(source, DEFAULT)
    assert default.verdict is None and any("[cache]" in note for note in default.notes), default.findings
    assert "cache" in _checks(source, STRICT)


# issue 44, third forms: forward's compute in module-level code it names (a helper, a lambda, an alias of a method
# that hands a tensor to NumPy), read as forward's own; a helper that only computes sizes stays clean under strict
_HELPER = "\n\ndef _product(A, B):\n    return torch.from_numpy(A.numpy() @ B.numpy())\n"
_ALIAS = "\n_to_array = torch._C.TensorBase.numpy\n"
_SIZES = "\n\ndef _blocks(n):\n    return (n + 255) // 256\n"


@pytest.mark.proves(Check.TORCH_COMPUTE)
@pytest.mark.parametrize("prelude,forward", [
    (_HELPER, "return relu_ext.relu_forward(_product(x, x))"),
    (_ALIAS, "return relu_ext.relu_forward(x) if _to_array(x).any() else x"),
], ids=["helper", "method-alias"])
def test_numpy_compute_in_module_level_code_forward_names_is_refused_under_strict(prelude: str, forward: str) -> None:
    findings = check_candidate(relu_variant(forward, prelude=prelude), STRICT).findings
    assert any(f.fatal and f.check == Check.TORCH_COMPUTE and "another array library" in f.message for f in findings)


def test_a_module_level_helper_that_computes_sizes_stays_clean_under_strict() -> None:
    source = relu_variant("assert _blocks(x.numel()) > 0\nreturn relu_ext.relu_forward(x)", prelude=_SIZES)
    assert check_candidate(source, STRICT).verdict is None, check_candidate(source, STRICT).findings
