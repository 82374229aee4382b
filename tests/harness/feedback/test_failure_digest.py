"""Failure digests: the compiler's error line reaches the model however much of the log precedes it, mapped back
to the candidate's own line; a traceback keeps the candidate's frames and the exception. The logs below are
verbatim from real builds on this repository's CPU toolchain (g++) and nvcc 13."""

from __future__ import annotations

from harness.feedback.failure_digest import (candidate_strings, compiler_diagnostics, digest_build_log,
                                             digest_reason, digest_traceback)

_BUILD = "/work/main/runs/builds/f44f1004da2df281a564f3fae15ba7f1bac77317eee59bac44fd7f337ab61458.tmp-324f0f21/build"
_VENV = "/work/main/.venv/lib/python3.11/site-packages"
_COMMAND = (f"c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=kw_f44f1004da2df281a564f3fa -DTORCH_API_INCLUDE_EXTENSION_H "
            f"-isystem {_VENV}/torch/include -isystem {_VENV}/torch/include/torch/csrc/api/include "
            f"-isystem /root/.pyenv/versions/3.11.7/include/python3.11 -fPIC -std=c++20 -O3 -fopenmp "
            f"-DTORCH_TARGET_VERSION=0x020d000000000000 -c {_BUILD}/main.cpp -o main.o ")
GCC_REASON = (f"Error building extension (ninja exit 1):\nninja: Entering directory `{_BUILD}'\n[1/2] {_COMMAND}\n"
              f"FAILED: [code=1] main.o \n{_COMMAND}\n"
              f"{_BUILD}/main.cpp: In function ‘torch::stable::Tensor relu_forward(torch::stable::Tensor)’:\n"
              f"{_BUILD}/main.cpp:13:5: error: ‘TORCH_CHECK’ was not declared in this scope; did you mean "
              "‘STD_TORCH_CHECK’?\n"
              '   13 |     TORCH_CHECK(input.numel() > 0, "empty");\n'
              "      |     ^~~~~~~~~~~\n"
              "      |     STD_TORCH_CHECK\n"
              "ninja: build stopped: subcommand failed.")
NVCC_REASON = ('nvcc failed (exit 1):\ncuda.cu(18): error: identifier "TORCH_CHECK" is undefined\n'
               '      TORCH_CHECK(input.numel() > 0, "empty");\n      ^\n\n'
               '1 error detected in the compilation of "cuda.cu".')

CPU_CANDIDATE = '''import torch
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

Tensor relu_forward(Tensor x) {
    Tensor input = torch::stable::contiguous(x);
    Tensor out = torch::stable::empty_like(input);
    const float* src = static_cast<const float*>(input.data_ptr());
    float* dst = static_cast<float*>(out.data_ptr());
    TORCH_CHECK(input.numel() > 0, "empty");
    return out;
}
"""
'''


def test_the_gcc_error_line_survives_a_long_command_prefix_and_maps_to_the_candidates_line() -> None:
    assert GCC_REASON.index("error: ‘TORCH_CHECK’") > 1500  # the old cut at 1500 characters lost it
    digest = digest_reason(GCC_REASON, CPU_CANDIDATE)
    assert "‘TORCH_CHECK’ was not declared in this scope; did you mean ‘STD_TORCH_CHECK’?" in digest
    assert "line 13 of `cpp_source` (line 16 of your file)" in digest
    assert CPU_CANDIDATE.splitlines()[15].strip().startswith("TORCH_CHECK")
    assert "-isystem" not in digest and "ninja:" not in digest and len(digest) < 600


def test_the_nvcc_form_is_read_and_mapped_too() -> None:
    source = CPU_CANDIDATE.replace("cpp_source", "cuda_source").replace("return out;", "\n\n\n\n\n    return out;")
    [diagnostic] = compiler_diagnostics(NVCC_REASON)
    assert (diagnostic.file, diagnostic.line, diagnostic.severity) == ("cuda.cu", 18, "error")
    digest = digest_reason(NVCC_REASON.replace("cuda.cu(18)", "cuda.cu(13)"), source)
    assert 'identifier "TORCH_CHECK" is undefined' in digest and "line 13 of `cuda_source`" in digest


def test_an_error_line_that_cannot_be_matched_keeps_the_compilers_own_place() -> None:
    digest = digest_reason(GCC_REASON, "print('no C++ here')\n")
    assert "main.cpp:13: error: ‘TORCH_CHECK’" in digest


def test_many_errors_keep_the_first_and_the_last_within_the_budget() -> None:
    errors = "\n".join(f"{_BUILD}/main.cpp:{n}:1: error: problem number {n}\n   {n} | x{n};\n      | ^"
                       for n in range(1, 200))
    digest = digest_build_log(f"[1/2] {_COMMAND}\n{errors}\n", budget=1500)
    assert len(digest) <= 1500
    assert "problem number 1\n" in digest and "problem number 199" in digest and "problem number 100\n" not in digest
    assert digest.startswith("199 compiler error(s),")


def test_a_log_without_a_diagnostic_keeps_its_tail_without_the_commands() -> None:
    log = f"[1/2] {_COMMAND}\n/usr/bin/ld: main.o: undefined reference to `foo()'\ncollect2: error: ld returned 1"
    digest = digest_build_log(log)
    assert "undefined reference to `foo()'" in digest and "-isystem" not in digest


def test_a_traceback_keeps_the_candidates_frames_and_the_exception() -> None:
    reason = ("failed while run:\nTraceback (most recent call last):\n"
              '  File "/work/main/harness/child/main.py", line 157, in _call\n    return model(*inputs)\n'
              "           ^^^^^^^^^^^^^^\n"
              '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1778, in _call_impl\n'
              "    return self._call_impl(*args, **kwargs)\n"
              '  File "/work/main/runs/scratch/eval-1/candidate.py", line 36, in forward\n'
              "    return torch.ops.kw_relu.relu_forward(x, 3)\n"
              '  File "/venv/lib/python3.11/site-packages/torch/_ops.py", line 1279, in __call__\n'
              "    return self._op(*args, **kwargs)\n"
              "RuntimeError: kw_relu::relu_forward() expected at most 1 argument(s) but received 2 argument(s).")
    digest = digest_traceback(reason)
    assert "your file, line 36, in forward: return torch.ops.kw_relu.relu_forward(x, 3)" in digest
    assert digest.endswith("received 2 argument(s).") and "harness/child" not in digest
    assert "torch/_ops.py, line 1279" in digest
    long = digest_traceback(reason.replace("RuntimeError: ", "RuntimeError: " + "x" * 5000), budget=1000)
    assert len(long) <= 1000 and "your file, line 36" in long and "RuntimeError: xxx" in long


def test_other_reasons_pass_through_within_the_budget() -> None:
    assert digest_reason("output mismatch at index 3", None) == "output mismatch at index 3"
    assert len(digest_reason("y" * 10000, None, budget=500)) <= 500


def test_only_strings_whose_lines_map_to_the_file_are_used() -> None:
    source = 'a = "x\\ny"\nb = """p\nq"""\n'
    assert [(s.name, s.first_line, s.lines) for s in candidate_strings(source)] == [("b", 2, ("p", "q"))]
