import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

// Direct convolution (stride 1, no padding), optionally followed by ReLU and a per-channel bias:
// out = relu?(conv(x, w) + conv_bias) + post_bias. Empty tensors mean "absent".
torch::Tensor conv2d_fused(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias,
                           torch::Tensor post_bias, bool relu) {
    auto input = x.contiguous();
    auto weight = w.contiguous();
    const int64_t n = input.size(0), c_in = input.size(1), h = input.size(2), wd = input.size(3);
    const int64_t c_out = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    const int64_t oh = h - kh + 1, ow = wd - kw + 1;
    auto out = torch::empty({n, c_out, oh, ow}, input.options());
    const float* xp = input.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* cb = conv_bias.numel() ? conv_bias.contiguous().data_ptr<float>() : nullptr;
    const float* pb = post_bias.numel() ? post_bias.contiguous().data_ptr<float>() : nullptr;
    float* op = out.data_ptr<float>();
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
"""

conv_ext = load_inline(
    name="conv2d_fused_cpu",
    cpp_sources=cpp_source,
    functions=["conv2d_fused"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_ext.conv2d_fused(x, self.conv.weight, self.conv.bias, self.bias.reshape(-1), True)
