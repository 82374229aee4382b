"""Issue 44 item 1: no less accurate than the reference. An approximation inside the tolerance was accepted as a
speedup on e19f4ec (the float64 contract only wrote a note); the contract decides now (`[oracle]`,
harness/verification/oracle.py). Each attack is written as a model with the harness's source would, beside an
honest control that stays accepted. One float16 extension serves all of them (one build): `row_sum(x, scale,
stride)` sums each row of a 2-D float16 tensor in blocks of 64 accumulated in float32 (stride 1: the honest
kernel), or, with stride s > 1, reads every s-th element of four quarters of the row and, where the four sampled
means agree within 2%, returns the sampled sum times s (true of every i.i.d. input: no knowledge of the trials
needed); where they disagree it sums the whole row."""

from __future__ import annotations

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from harness.shipping.precision import at_precision
from kernelbench.problem import problem_from_source

pytestmark = [pytest.mark.slow, pytest.mark.proves(Check.ORACLE)]
DEFAULT = EvalPolicy(timing_budget_s=0.2)
# the trials before the eighth (sparse) one: that trial's spikes catch a sampler by tolerance alone, and these tests
# prove the float64 oracle (where the trials' distributions let the sampler's error pass the tolerance)
BEFORE_SPARSE = EvalPolicy(timing_budget_s=0.2, trials=7)

ROW_SUM = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <cmath>
#include <cstdint>
#include <vector>

using torch::stable::Tensor;

static inline float h2f(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(float(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

static inline uint16_t f2h(float f) {  // round to nearest even
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const float a = std::fabs(f);
    if (std::isnan(f)) return 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < std::ldexp(1.0f, -14)) return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));
    int e;
    const float fr = std::frexp(a, &e);
    float q = std::nearbyint(std::ldexp(fr, 11));
    int exp = e - 1 + 15;
    if (q >= 2048.0f) { q = 1024.0f; ++exp; }
    if (exp >= 31) return sign | 0x7c00;
    return sign | uint16_t(exp << 10) | uint16_t(int(q) - 1024);
}

static float blocked(const uint16_t* row, int64_t n) {
    float total = 0.0f;
    for (int64_t b = 0; b < n; b += 64) {
        float part = 0.0f;
        for (int64_t i = b; i < b + 64 && i < n; ++i) part += h2f(row[i]);
        total += part;
    }
    return total;
}

static bool sampled(const uint16_t* row, int64_t n, int64_t stride, float* result) {
    float means[4], total = 0.0f, largest = 0.0f;
    const int64_t quarter = n / 4;
    for (int q = 0; q < 4; ++q) {
        float part = 0.0f;
        int64_t count = 0;
        for (int64_t i = q * quarter; i < (q + 1) * quarter; i += stride, ++count) {
            const float v = h2f(row[i]);
            part += v;
            largest = std::fmax(largest, std::fabs(v));
        }
        means[q] = part / float(count);
        total += part;
    }
    if (largest > 4.0f * std::fabs(means[0])) return false;  // heavy tails or spikes: read it all
    for (int q = 1; q < 4; ++q)
        if (std::fabs(means[q] - means[0]) > 0.02f * std::fabs(means[0])) return false;
    *result = total * float(stride);
    return true;
}

Tensor row_sum(Tensor x, double scale, int64_t stride) {
    STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Half && x.dim() == 2, "2-D float16");
    Tensor input = torch::stable::contiguous(x);
    const int64_t rows = input.size(0), n = input.size(1);
    Tensor out = torch::stable::new_empty(input, {rows});
    const uint16_t* src = static_cast<const uint16_t*>(input.data_ptr());
    uint16_t* dst = static_cast<uint16_t*>(out.data_ptr());
    for (int64_t r = 0; r < rows; ++r) {
        float total;
        if (stride <= 1 || !sampled(src + r * n, n, stride, &total)) total = blocked(src + r * n, n);
        dst[r] = f2h(float(total * scale));
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_row_sum_half, m) {
    m.def("row_sum(Tensor x, float scale, int stride) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_row_sum_half, CPU, m) { m.impl("row_sum", TORCH_BOX(&row_sum)); }
"""

load_inline(
    name="row_sum_half",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
)
ext = torch.ops.kw_row_sum_half


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.row_sum(x, SCALE, STRIDE)
'''


def _row_sum(scale: str, stride: int) -> str:
    return ROW_SUM.replace("SCALE", scale).replace("STRIDE", str(stride))


# (a) a float16 sum over rows of 262144 small positive values: sampled, 4e-3 off (tolerance 1e-2), 8x the allowed
SUM_ROWS = at_precision(problem_from_source('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)

def get_inputs():
    return [torch.rand(8, 262144) / 64]

def get_init_inputs():
    return []
''', "sum_rows_half", level=1), "fp16")

# (a') a float16 mean over rows of 131072 values in [0, 1), reading 1/8
MEAN_ROWS = at_precision(problem_from_source('''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=-1)

def get_inputs():
    return [torch.rand(32, 131072)]

def get_init_inputs():
    return []
''', "mean_rows_half", level=1), "fp16")


def _refused_by_the_oracle(evaluation: object) -> None:
    assert evaluation.verdict is Verdict.INCORRECT, evaluation.reasons
    oracle = next(f for f in evaluation.findings if f.check == "oracle")
    assert "the reference's own is" in oracle.message and "float16" in oracle.message


def test_a_float16_sum_that_reads_a_sixteenth_when_sub_block_means_agree_is_incorrect() -> None:
    _refused_by_the_oracle(evaluate(SUM_ROWS, _row_sum("1.0", 16), "cpu", BEFORE_SPARSE))


def test_a_float16_mean_that_reads_an_eighth_is_incorrect() -> None:
    _refused_by_the_oracle(evaluate(MEAN_ROWS, _row_sum("1.0 / 131072", 8), "cpu", BEFORE_SPARSE))


def test_an_honest_float16_blocked_sum_stays_accepted() -> None:
    evaluation = evaluate(SUM_ROWS, _row_sum("1.0", 1), "cpu", DEFAULT)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    numerics = evaluation.numerics
    assert numerics is not None and numerics.candidate is not None and numerics.reference is not None
    assert numerics.candidate.relative <= 2 * numerics.reference.relative + 1e-4
