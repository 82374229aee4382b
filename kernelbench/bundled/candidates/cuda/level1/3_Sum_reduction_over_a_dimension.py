import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <vector>

// One thread per output element; neighbouring threads read neighbouring elements of the inner dimension.
__global__ void sum_dim_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t reduce,
                              int64_t inner) {
    const int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (index >= outer * inner) return;
    const int64_t o = index / inner, i = index % inner;
    const float* row = x + o * reduce * inner + i;
    float acc = 0.0f;
    for (int64_t r = 0; r < reduce; ++r) {
        const float v = row[r * inner];
        acc = acc + v;
    }
    y[index] = acc;
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "expects a float CUDA tensor");
    auto input = x.contiguous();
    if (dim < 0) dim += input.dim();
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= input.size(d);
    for (int64_t d = dim + 1; d < input.dim(); ++d) inner *= input.size(d);
    std::vector<int64_t> shape = input.sizes().vec();
    shape[dim] = 1;  // keepdim=True
    auto out = torch::empty(shape, input.options());
    const int threads = 256;
    const int64_t blocks = (outer * inner + threads - 1) / threads;
    sum_dim_kernel<<<(unsigned)blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), outer,
                                                  input.size(dim), inner);
    return out;
}
"""

cpp_source = "torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(
    name="sum_dim_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_dim_forward(x, self.dim)
