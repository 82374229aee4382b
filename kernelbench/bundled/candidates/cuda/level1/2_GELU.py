import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, float scale, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor gelu_forward(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "expects a float CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    gelu_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), (float)scale, n);
    return out;
}
"""

cpp_source = "torch::Tensor gelu_forward(torch::Tensor x, double scale);"

gelu_ext = load_inline(
    name="gelu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gelu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_forward(x, self.scale)
