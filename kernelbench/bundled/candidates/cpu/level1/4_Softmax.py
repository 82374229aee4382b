# An honest, correct kernel, not a speedup: at one thread it is slower than PyTorch's own (a new user measured
# 0.19-0.25x on a 2-core x86 CPU, issue 48); kernelwright reports it as "no speedup found".
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <cmath>

using torch::stable::Tensor;

Tensor softmax_rows(Tensor x) {
    STD_TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::headeronly::ScalarType::Float, "expects a 2-D float tensor");
    Tensor input = torch::stable::contiguous(x);
    auto out = torch::stable::empty_like(input);
    const int64_t rows = input.size(0), cols = input.size(1);
    const float* src = input.mutable_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* in_row = src + r * cols;
        float* out_row = dst + r * cols;
        float peak = in_row[0];
        for (int64_t c = 1; c < cols; ++c) peak = in_row[c] > peak ? in_row[c] : peak;
        double total = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            out_row[c] = std::exp(in_row[c] - peak);
            total += out_row[c];
        }
        const float scale = static_cast<float>(1.0 / total);
        for (int64_t c = 0; c < cols; ++c) out_row[c] *= scale;
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_softmax_cpu, m) {
    m.def("softmax_rows(Tensor x) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_softmax_cpu, CPU, m) {
    m.impl("softmax_rows", TORCH_BOX(&softmax_rows));
}
"""

load_inline(
    name="softmax_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
softmax_ext = torch.ops.kw_softmax_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_rows(x)
