import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <cmath>

using torch::stable::Tensor;

// Normalize each trailing block of `weight.numel()` elements, then apply the affine parameters.
Tensor layer_norm_forward(Tensor x, Tensor weight, Tensor bias, double eps) {
    Tensor input = torch::stable::contiguous(x);
    Tensor w = torch::stable::contiguous(weight);
    Tensor b = torch::stable::contiguous(bias);
    const int64_t block = w.numel();
    const int64_t blocks = input.numel() / block;
    auto out = torch::stable::empty_like(input);
    const float* src = input.mutable_data_ptr<float>();
    const float* wp = w.mutable_data_ptr<float>();
    const float* bp = b.mutable_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
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

STABLE_TORCH_LIBRARY(kw_layer_norm_cpu, m) {
    m.def("layer_norm_forward(Tensor x, Tensor weight, Tensor bias, float eps) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_layer_norm_cpu, CPU, m) {
    m.impl("layer_norm_forward", TORCH_BOX(&layer_norm_forward));
}
"""

load_inline(
    name="layer_norm_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
ln_ext = torch.ops.kw_layer_norm_cpu


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        with torch.no_grad():  # same parameter draws as the reference, in the same order
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ln_ext.layer_norm_forward(x, self.ln.weight, self.ln.bias, self.ln.eps)
