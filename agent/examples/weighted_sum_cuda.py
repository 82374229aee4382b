# (x * weight).sum(dim): an int argument, a weight tensor, an output of another shape, checks with STD_TORCH_CHECK
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/accelerator.h>
#include <cuda_runtime.h>
#include <vector>

using torch::stable::Tensor;

// one thread per output element; neighbouring threads read neighbouring addresses of each row (coalesced)
__global__ void weighted_sum_kernel(const float* __restrict__ src, const float* __restrict__ w,
                                    float* __restrict__ dst, int64_t reduce, int64_t inner, int64_t total) {
    const int64_t index = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (index >= total) return;
    const int64_t o = index / inner, i = index % inner;
    const float* column = src + o * reduce * inner + i;
    float acc = 0.0f;
    for (int64_t r = 0; r < reduce; ++r) acc += w[r] * column[r * inner];
    dst[index] = acc;
}

// schema `int dim` arrives as int64_t (a schema `float` would be a double, `Tensor?` a std::optional<Tensor>)
Tensor weighted_sum(Tensor x, Tensor weight, int64_t dim) {
    STD_TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::headeronly::ScalarType::Float,
                    "expected a float32 CUDA tensor");
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
    const int64_t total = outer * inner;
    const int threads = 256;
    const int64_t blocks = (total + threads - 1) / threads;
    auto stream = torch::stable::accelerator::getCurrentStream(input.get_device_index());
    weighted_sum_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream.nativeHandle())>>>(
        input.const_data_ptr<float>(), w.const_data_ptr<float>(), out.mutable_data_ptr<float>(), reduce, inner,
        total);
    return out;
}

STABLE_TORCH_LIBRARY(kw_wsum_cuda, m) { m.def("weighted_sum(Tensor x, Tensor weight, int dim) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(kw_wsum_cuda, CUDA, m) { m.impl("weighted_sum", TORCH_BOX(&weighted_sum)); }
"""

load_inline(name="kw_wsum_cuda", cpp_sources="", cuda_sources=cuda_source, is_python_module=False,
            no_implicit_headers=True, extra_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
            extra_cuda_cflags=["-O3", "-DTORCH_TARGET_VERSION=0x020d000000000000"])


class ModelNew(nn.Module):
    def __init__(self, dim: int, size: int):
        super().__init__()
        self.dim = dim
        self.weight = nn.Parameter(torch.randn(size))  # created as Model creates it, so the weights match

    def forward(self, x):
        return torch.ops.kw_wsum_cuda.weighted_sum(x, self.weight, self.dim)
