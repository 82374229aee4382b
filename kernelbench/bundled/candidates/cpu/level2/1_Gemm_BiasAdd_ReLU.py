import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

// y = x @ W^T + b, optionally ReLU'd, in one pass: each output is a contiguous dot product.
torch::Tensor linear_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, bool relu) {
    auto input = x.contiguous();
    auto w = weight.contiguous();
    auto b = bias.contiguous();
    const int64_t rows = input.size(0), in_f = input.size(1), out_f = w.size(0);
    auto out = torch::empty({rows, out_f}, input.options());
    const float* xp = input.data_ptr<float>();
    const float* wp = w.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* op = out.data_ptr<float>();
    #pragma omp parallel for collapse(2)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < out_f; ++o) {
            const float* xr = xp + r * in_f;
            const float* wr = wp + o * in_f;
            double acc = bp[o];
            for (int64_t k = 0; k < in_f; ++k) acc += double(xr[k]) * wr[k];
            float v = static_cast<float>(acc);
            op[r * out_f + o] = (relu && v < 0.0f) ? 0.0f : v;
        }
    }
    return out;
}
"""

linear_ext = load_inline(
    name="linear_cpu",
    cpp_sources=cpp_source,
    functions=["linear_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_ext.linear_forward(x, self.linear.weight, self.linear.bias, True)
