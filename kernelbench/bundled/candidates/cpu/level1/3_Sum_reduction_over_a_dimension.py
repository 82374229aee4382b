import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <vector>

using torch::stable::Tensor;

// Sum over `dim`, keeping it: view the tensor as [outer, reduce, inner] and accumulate rows of `inner`.
Tensor sum_dim_forward(Tensor x, int64_t dim) {
    STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float, "expects float");
    Tensor input = torch::stable::contiguous(x);
    if (dim < 0) dim += input.dim();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
    for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
    const int64_t reduce = input.size(dim);
    std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
    shape[dim] = 1;
    Tensor out = torch::stable::new_empty(input, shape);
    const float* src = input.mutable_data_ptr<float>();
    float* dst = out.mutable_data_ptr<float>();
    #pragma omp parallel for
    for (int64_t o = 0; o < outer; ++o) {
        std::vector<double> acc(inner, 0.0);
        for (int64_t r = 0; r < reduce; ++r) {
            const float* row = src + (o * reduce + r) * inner;
            for (int64_t i = 0; i < inner; ++i) acc[i] += row[i];
        }
        for (int64_t i = 0; i < inner; ++i) dst[o * inner + i] = static_cast<float>(acc[i]);
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_sum_dim_cpu, m) {
    m.def("sum_dim_forward(Tensor x, int dim) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_sum_dim_cpu, CPU, m) {
    m.impl("sum_dim_forward", TORCH_BOX(&sum_dim_forward));
}
"""

load_inline(
    name="sum_dim_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
sum_ext = torch.ops.kw_sum_dim_cpu


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x, self.dim)
