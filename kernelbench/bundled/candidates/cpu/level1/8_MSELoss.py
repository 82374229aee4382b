import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor mse_forward(torch::Tensor predictions, torch::Tensor targets) {
    TORCH_CHECK(predictions.sizes() == targets.sizes(), "shape mismatch");
    auto p = predictions.contiguous();
    auto t = targets.contiguous();
    const float* pp = p.data_ptr<float>();
    const float* tp = t.data_ptr<float>();
    const int64_t n = p.numel();
    double total = 0.0;
    #pragma omp parallel for reduction(+:total)
    for (int64_t i = 0; i < n; ++i) {
        const double d = double(pp[i]) - tp[i];
        total += d * d;
    }
    return torch::full({}, static_cast<float>(total / n), p.options());
}
"""

mse_ext = load_inline(
    name="mse_cpu",
    cpp_sources=cpp_source,
    functions=["mse_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse_ext.mse_forward(predictions, targets)
