# (x * weight).sum(dim): an int argument, a weight tensor, an output of another shape, checks with STD_TORCH_CHECK
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <vector>

using torch::stable::Tensor;

// schema `int dim` arrives as int64_t (a schema `float` would be a double, `Tensor?` a std::optional<Tensor>)
Tensor weighted_sum(Tensor x, Tensor weight, int64_t dim) {
    STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float, "expected float32 input");
    Tensor input = torch::stable::contiguous(x);
    Tensor w = torch::stable::contiguous(weight);
    if (dim < 0) dim += input.dim();
    const int64_t reduce = input.size(dim);
    STD_TORCH_CHECK(w.numel() == reduce, "weight length must equal the reduced dimension");
    int64_t outer = 1, inner = 1;
    std::vector<int64_t> shape;  // the output's shape: the input's without `dim`
    for (int64_t d = 0; d < input.dim(); ++d) {
        if (d < dim) outer *= input.size(d);
        if (d > dim) inner *= input.size(d);
        if (d != dim) shape.push_back(input.size(d));
    }
    Tensor out = torch::stable::new_empty(input, shape);
    const float* src = input.const_data_ptr<float>();
    const float* wp = w.const_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
    for (int64_t o = 0; o < outer; ++o) {
        float* acc = dst + o * inner;
        for (int64_t i = 0; i < inner; ++i) acc[i] = 0.0f;
        for (int64_t r = 0; r < reduce; ++r) {
            const float* row = src + (o * reduce + r) * inner;
            const float scale = wp[r];
            for (int64_t i = 0; i < inner; ++i) acc[i] += scale * row[i];  // contiguous: -O3 vectorizes it
        }
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_wsum, m) { m.def("weighted_sum(Tensor x, Tensor weight, int dim) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(kw_wsum, CPU, m) { m.impl("weighted_sum", TORCH_BOX(&weighted_sum)); }
"""

load_inline(name="kw_wsum", cpp_sources=cpp_source, is_python_module=False, no_implicit_headers=True,
            extra_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, size: int):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.randn(size))  # created as Model creates it, so the weights match

    def forward(self, x):
        return torch.ops.kw_wsum.weighted_sum(x, self.weight, self.dim)
