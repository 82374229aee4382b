import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <cmath>

using torch::stable::Tensor;

// y = tanh(x * scale) + x in one pass over memory instead of three.
Tensor scale_tanh_residual(Tensor x, double scale) {
    Tensor input = torch::stable::contiguous(x);
    auto out = torch::stable::empty_like(input);
    const float* src = input.mutable_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
    const float s = static_cast<float>(scale);
    const int64_t n = input.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = std::tanh(src[i] * s) + src[i];
    return out;
}

STABLE_TORCH_LIBRARY(kw_scale_tanh_residual_cpu, m) {
    m.def("scale_tanh_residual(Tensor x, float scale) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_scale_tanh_residual_cpu, CPU, m) {
    m.impl("scale_tanh_residual", TORCH_BOX(&scale_tanh_residual));
}
"""

load_inline(
    name="scale_tanh_residual_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
chain_ext = torch.ops.kw_scale_tanh_residual_cpu


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return chain_ext.scale_tanh_residual(x, self.scale)
