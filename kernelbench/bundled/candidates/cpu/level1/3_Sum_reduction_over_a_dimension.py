import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

// Sum over `dim`, keeping it: view the tensor as [outer, reduce, inner] and accumulate rows of `inner`.
torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "expects float");
    auto input = x.contiguous();
    if (dim < 0) dim += input.dim();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
    for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
    const int64_t reduce = input.size(dim);
    std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
    shape[dim] = 1;
    auto out = torch::empty(shape, input.options());
    const float* src = input.data_ptr<float>();
    float* dst = out.data_ptr<float>();
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
"""

sum_ext = load_inline(
    name="sum_dim_cpu",
    cpp_sources=cpp_source,
    functions=["sum_dim_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x, self.dim)
