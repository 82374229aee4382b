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

Tensor gelu_forward(Tensor x) {
    STD_TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::headeronly::ScalarType::Float, "expects a float CPU tensor");
    Tensor input = torch::stable::contiguous(x);
    auto out = torch::stable::empty_like(input);
    const float* src = input.mutable_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
    const int64_t n = input.numel();
    const float inv_sqrt2 = 0.70710678118654752440f;
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        dst[i] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2));
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_gelu_cpu, m) {
    m.def("gelu_forward(Tensor x) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_gelu_cpu, CPU, m) {
    m.impl("gelu_forward", TORCH_BOX(&gelu_forward));
}
"""

load_inline(
    name="gelu_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
gelu_ext = torch.ops.kw_gelu_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_forward(x)
