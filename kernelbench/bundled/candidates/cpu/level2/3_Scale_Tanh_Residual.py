import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

// y = tanh(x * scale) + x in one pass over memory instead of three.
torch::Tensor scale_tanh_residual(torch::Tensor x, double scale) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* src = input.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float s = static_cast<float>(scale);
    const int64_t n = input.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) dst[i] = std::tanh(src[i] * s) + src[i];
    return out;
}
"""

chain_ext = load_inline(
    name="scale_tanh_residual_cpu",
    cpp_sources=cpp_source,
    functions=["scale_tanh_residual"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return chain_ext.scale_tanh_residual(x, self.scale)
