import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

// Normalize each trailing block of `weight.numel()` elements, then apply the affine parameters.
torch::Tensor layer_norm_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t block = w.numel();
    const int64_t blocks = input.numel() / block;
    auto out = torch::empty_like(input);
    const float* src = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t k = 0; k < blocks; ++k) {
        const float* in = src + k * block;
        double sum = 0.0, sum_sq = 0.0;
        for (int64_t i = 0; i < block; ++i) { sum += in[i]; sum_sq += double(in[i]) * in[i]; }
        const double mean = sum / block;
        const double var = sum_sq / block - mean * mean;
        const float inv_std = static_cast<float>(1.0 / std::sqrt(var + eps));
        const float m = static_cast<float>(mean);
        float* o = dst + k * block;
        for (int64_t i = 0; i < block; ++i) o[i] = (in[i] - m) * inv_std * wp[i] + bp[i];
    }
    return out;
}
"""

ln_ext = load_inline(
    name="layer_norm_cpu",
    cpp_sources=cpp_source,
    functions=["layer_norm_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():  # same parameter draws as the reference, in the same order
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ln_ext.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
