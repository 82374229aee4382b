import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

// y = x @ W^T + b, optionally ReLU'd, in one pass: each output is a contiguous dot product.
Tensor linear_forward(Tensor x, Tensor weight, Tensor bias, bool relu) {
    Tensor input = torch::stable::contiguous(x);
    Tensor w = torch::stable::contiguous(weight);
    Tensor b = torch::stable::contiguous(bias);
    const int64_t rows = input.size(0), in_f = input.size(1), out_f = w.size(0);
    auto out = torch::stable::new_empty(input, {rows, out_f});
    const float* xp = input.mutable_data_ptr<float>();
    const float* wp = w.mutable_data_ptr<float>();
    const float* bp = b.mutable_data_ptr<float>();
    float* op = out.mutable_data_ptr<float>();
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

STABLE_TORCH_LIBRARY(kw_linear_cpu, m) {
    m.def("linear_forward(Tensor x, Tensor weight, Tensor bias, bool relu) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_linear_cpu, CPU, m) {
    m.impl("linear_forward", TORCH_BOX(&linear_forward));
}
"""

load_inline(
    name="linear_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
linear_ext = torch.ops.kw_linear_cpu


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_ext.linear_forward(x, self.linear.weight, self.linear.bias, True)
