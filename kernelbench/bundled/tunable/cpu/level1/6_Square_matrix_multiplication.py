import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Tunable compile-time constants (agent/search/tunables.py): the first value of each list is the default; the
# harness builds variants with each list pinned to one value, and the C++ reads them as -D defines.
TUNE = {"ROWS": [1, 2, 4, 8], "BLOCK_J": [64, 128, 256], "BLOCK_K": [32, 64, 256]}

cpp_source = r"""
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/csrc/stable/ops.h>

using torch::stable::Tensor;

// C = A @ B, blocked: ROWS rows of C at a time share each row of B (register blocking), over BLOCK_J columns
// and BLOCK_K steps of k at a time (cache blocking); the inner loop over j vectorizes.
template <int R>
static void rows_block(const float* ap, const float* bp, float* cp, int64_t i0, int64_t k_dim, int64_t m) {
    for (int64_t j0 = 0; j0 < m; j0 += BLOCK_J) {
        const int64_t j1 = j0 + BLOCK_J < m ? j0 + BLOCK_J : m;
        for (int64_t k0 = 0; k0 < k_dim; k0 += BLOCK_K) {
            const int64_t k1 = k0 + BLOCK_K < k_dim ? k0 + BLOCK_K : k_dim;
            for (int64_t k = k0; k < k1; ++k) {
                const float* b_row = bp + k * m;
                float a[R];
                for (int r = 0; r < R; ++r) a[r] = ap[(i0 + r) * k_dim + k];
                #pragma omp simd
                for (int64_t j = j0; j < j1; ++j) {
                    const float b = b_row[j];
                    for (int r = 0; r < R; ++r) cp[(i0 + r) * m + j] += a[r] * b;
                }
            }
        }
    }
}

Tensor matmul_forward(Tensor a, Tensor b) {
    STD_TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
    Tensor A = torch::stable::contiguous(a);
    Tensor B = torch::stable::contiguous(b);
    const int64_t n = A.size(0), k_dim = A.size(1), m = B.size(1);
    auto C = torch::stable::new_zeros(A, {n, m});
    const float* ap = A.mutable_data_ptr<float>();
    const float* bp = B.mutable_data_ptr<float>();
    float* cp = C.mutable_data_ptr<float>();
    const int64_t full = n - n % ROWS;
    #pragma omp parallel for
    for (int64_t i0 = 0; i0 < full; i0 += ROWS) rows_block<ROWS>(ap, bp, cp, i0, k_dim, m);
    for (int64_t i0 = full; i0 < n; ++i0) rows_block<1>(ap, bp, cp, i0, k_dim, m);
    return C;
}

STABLE_TORCH_LIBRARY(kw_matmul_tuned_cpu, m) {
    m.def("matmul_forward(Tensor a, Tensor b) -> Tensor");
}
STABLE_TORCH_LIBRARY_IMPL(kw_matmul_tuned_cpu, CPU, m) {
    m.impl("matmul_forward", TORCH_BOX(&matmul_forward));
}
"""

load_inline(
    name="matmul_tuned_cpu",
    cpp_sources=cpp_source,
    is_python_module=False,
    no_implicit_headers=True,
    extra_cflags=["-O3", "-fopenmp", "-DTORCH_TARGET_VERSION=0x020d000000000000"]
    + [f"-D{name}={values[0]}" for name, values in TUNE.items()],
    extra_ldflags=["-fopenmp"],
)
matmul_ext = torch.ops.kw_matmul_tuned_cpu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
