import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

// Direct convolution (stride 1, no padding), optionally followed by ReLU and a per-channel bias:
// out = relu?(conv(x, w) + conv_bias) + post_bias. Empty tensors mean "absent".
Tensor conv2d_fused(Tensor x, Tensor w, Tensor conv_bias, Tensor post_bias, bool relu) {
    Tensor input = torch::stable::contiguous(x);
    Tensor weight = torch::stable::contiguous(w);
    const int64_t n = input.size(0), c_in = input.size(1), h = input.size(2), wd = input.size(3);
    const int64_t c_out = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    const int64_t oh = h - kh + 1, ow = wd - kw + 1;
    auto out = torch::stable::new_empty(input, {n, c_out, oh, ow});
    const float* xp = input.mutable_data_ptr<float>();
    const float* wp = weight.mutable_data_ptr<float>();
    Tensor cbt = torch::stable::contiguous(conv_bias);
    Tensor pbt = torch::stable::contiguous(post_bias);
    const float* cb = cbt.numel() ? cbt.mutable_data_ptr<float>() : nullptr;
    const float* pb = pbt.numel() ? pbt.mutable_data_ptr<float>() : nullptr;
    float* op = out.mutable_data_ptr<float>();
    #pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < n; ++b) {
        for (int64_t co = 0; co < c_out; ++co) {
            for (int64_t y = 0; y < oh; ++y) {
                for (int64_t xo = 0; xo < ow; ++xo) {
                    double acc = cb ? cb[co] : 0.0;
                    for (int64_t ci = 0; ci < c_in; ++ci)
                        for (int64_t ky = 0; ky < kh; ++ky)
                            for (int64_t kx = 0; kx < kw; ++kx)
                                acc += double(xp[((b * c_in + ci) * h + y + ky) * wd + xo + kx]) *
                                       wp[((co * c_in + ci) * kh + ky) * kw + kx];
                    float v = static_cast<float>(acc);
                    if (relu && v < 0.0f) v = 0.0f;
                    if (pb) v += pb[co];
                    op[((b * c_out + co) * oh + y) * ow + xo] = v;
                }
            }
        }
    }
    return out;
}

STABLE_TORCH_LIBRARY(kw_conv2d_fused_cpu, m) {
    m.def("conv2d_fused(Tensor x, Tensor w, Tensor conv_bias, Tensor post_bias, bool relu) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_conv2d_fused_cpu, CPU, m) {
    m.impl("conv2d_fused", TORCH_BOX(&conv2d_fused));
}
"""

load_inline(
    name="conv2d_fused_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"],
    extra_ldflags=["-fopenmp"],
)
conv_ext = torch.ops.kw_conv2d_fused_cpu


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)
        self.register_buffer("no_bias", torch.empty(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_ext.conv2d_fused(x, self.conv.weight, self.no_bias, self.no_bias, False)
