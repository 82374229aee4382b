import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == torch::kFloat, "expects a float CPU tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* src = input.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t n = input.numel();
    const float inv_sqrt2 = 0.70710678118654752440f;
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i];
        dst[i] = 0.5f * v * (1.0f + std::erf(v * inv_sqrt2));
    }
    return out;
}
"""

gelu_ext = load_inline(
    name="gelu_cpu",
    cpp_sources=cpp_source,
    functions=["gelu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_forward(x)
