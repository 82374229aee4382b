import torch
import torch.nn as nn
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
    const int64_t n = input.numel();
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    return out;
}

STABLE_TORCH_LIBRARY(kw_relu, m) { m.def("relu_forward(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(kw_relu, CPU, m) { m.impl("relu_forward", TORCH_BOX(&relu_forward)); }
"""

load_inline(name="kw_relu", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.ops.kw_relu.relu_forward(x)
