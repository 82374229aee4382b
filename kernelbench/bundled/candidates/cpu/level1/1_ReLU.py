import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# the light contract: torch's stable ABI headers only (a build in seconds, not the 20-120 s of torch/extension.h)
cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

Tensor relu_forward(Tensor x) {
    STD_TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::headeronly::ScalarType::Float,
                    "expects a float CPU tensor");
    Tensor input = torch::stable::contiguous(x);
    Tensor out = torch::stable::empty_like(input);
    const float* src = static_cast<const float*>(input.data_ptr());
    float* dst = static_cast<float*>(out.data_ptr());
    const int64_t n = input.numel();
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) {
        dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_relu_cpu, m) { m.def("relu_forward(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(kw_relu_cpu, CPU, m) { m.impl("relu_forward", TORCH_BOX(&relu_forward)); }
"""

load_inline(
    name="relu_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
relu_ext = torch.ops.kw_relu_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
