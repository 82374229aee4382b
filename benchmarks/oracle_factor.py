"""How far honest reorderings move a kernel's error against a float64 run, relative to the reference's own error:
the measurements behind the float64 contract's factor and floor (harness/verification/oracle.py, docs/verdicts.md).

For each dtype and size, a reference (PyTorch's own sum / matmul / softmax at that dtype) and honest reorderings of
the same computation: a blocked sum (blocks of 64, accumulated in float32), a sequential float32 accumulation (the
naive loop a CPU kernel writes), a fused multiply-add chain (float64 products rounded once), a pairwise sum, a
float64 accumulation; and the shortcuts the contract must refuse: a sum that reads 1/4 or 1/16 of its input and
scales it up, and a term of 1e-4 of the output skipped. Last, `sampled_sums`: the red team's samplers that read a
part only where its parts agree, beside honest blocked sums, on each structured distribution the trials send. Printed: each one's norm-wise relative error against
float64, its ratio to the reference's and to max(reference's, floor). Run: python benchmarks/oracle_factor.py
"""

from __future__ import annotations

import torch

from harness.verification.oracle import FACTOR, FLOOR_EPS, allowed_error, dtype_name, floor_error

torch.manual_seed(0)


def rel(got: torch.Tensor, exact: torch.Tensor) -> float:
    diff = got.double() - exact
    norm = float(exact.norm())
    return float(diff.norm()) / norm if norm else float(diff.norm())


def sequential(x: torch.Tensor, acc: torch.dtype) -> torch.Tensor:
    """A naive loop over the last dim, accumulating in `acc`, vectorised over rows."""
    total = torch.zeros(x.shape[:-1], dtype=acc)
    for i in range(x.shape[-1]):
        total = (total + x[..., i].to(acc)).to(acc)
    return total


def blocked(x: torch.Tensor, block: int = 64) -> torch.Tensor:
    n = x.shape[-1]
    parts = x.float().reshape(*x.shape[:-1], n // block, block).sum(-1)
    return sequential(parts, torch.float32)


def subsampled(x: torch.Tensor, stride: int) -> torch.Tensor:
    return x[..., ::stride].float().sum(-1) * stride


def rows(dtype: torch.dtype, n: int, signed: bool) -> torch.Tensor:
    x = torch.randn(64, n) if signed else torch.rand(64, n)
    return x.to(dtype)


def report(name: str, dtype: torch.dtype, got: torch.Tensor, ref_err: float, exact: torch.Tensor) -> None:
    err = rel(got.to(dtype), exact)
    floor = floor_error(dtype_name(dtype), exact.numel())
    verdict = "REFUSED" if err > allowed_error(ref_err, dtype_name(dtype), count=exact.numel()) else "passes"
    print(f"  {name:28s} err {err:9.3g}  /ref {err / max(ref_err, 1e-300):9.3g}  /max(ref,floor) "
          f"{err / max(ref_err, floor):7.3g}  {verdict}")


def sums() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n, signed in ((1024, True), (16384, False), (65536, True), (262144, True)):
            x = rows(dtype, n, signed)[: 64 if n < 262144 else 4]
            exact = x.double().sum(-1)
            ref = x.sum(-1)
            ref_err = rel(ref, exact)
            print(f"sum {dtype} n={n} {'signed' if signed else 'rand'}: reference err {ref_err:.3g} "
                  f"(factor {FACTOR[dtype_name(dtype)]:g}, floor {FLOOR_EPS[dtype_name(dtype)]:g} eps)")
            report("blocked fp32 (64)", dtype, blocked(x), ref_err, exact)
            report("sequential fp32", dtype, sequential(x, torch.float32), ref_err, exact)
            report("pairwise fp32", dtype, x.float().sum(-1), ref_err, exact)
            report("fp64 accumulate", dtype, x.double().sum(-1), ref_err, exact)
            if dtype != torch.float32:
                report("sequential in dtype (no fp32)", dtype, sequential(x, dtype), ref_err, exact)
            report("reads 1/4", dtype, subsampled(x, 4), ref_err, exact)
            report("reads 1/16", dtype, subsampled(x, 16), ref_err, exact)


def matmuls() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for k in (256, 4096):
            a, b = torch.randn(128, k).to(dtype), torch.randn(k, 128).to(dtype)
            exact = a.double() @ b.double()
            ref = a @ b
            ref_err = rel(ref, exact)
            print(f"matmul {dtype} K={k}: reference err {ref_err:.3g}")
            fma = (a.double().unsqueeze(-1) * b.double().unsqueeze(0)).float()  # products exact, sums in float32
            report("fma chain (seq fp32 sums)", dtype, sequential(fma.transpose(1, 2), torch.float32), ref_err, exact)
            report("blocked fp32 (64)", dtype, blocked((a.float().unsqueeze(-1) * b.float().unsqueeze(0))
                                                    .transpose(1, 2)), ref_err, exact)
            term = 1e-4 * float(exact.pow(2).mean().sqrt()) * torch.randn_like(exact)
            report("a 1e-4 term skipped", dtype, ref, rel((ref.double() + term).to(dtype), exact + term),
                   exact + term)


def pointwise() -> None:
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(64, 4096).to(dtype)
        for name, fn in (("softmax", lambda t: torch.softmax(t, -1)), ("gelu", torch.nn.functional.gelu),
                         ("tanh", torch.tanh)):
            exact = fn(x.double())
            ref = fn(x)
            ref_err = rel(ref, exact)
            print(f"{name} {dtype}: reference err {ref_err:.3g}")
            report("computed in fp32, rounded", dtype, fn(x.float()), ref_err, exact)
            if name == "softmax":
                e = torch.exp(x.float() - x.float().amax(-1, keepdim=True))
                report("exp then divide, fp32", dtype, e / sequential(e, torch.float32).unsqueeze(-1), ref_err,
                       exact)


def agreeing_sampler(x: torch.Tensor, stride: int, strided: bool, agree: float = 0.02) -> torch.Tensor:
    """The red team's sampler (issue 44): per row, four parts read (the first 1/stride of each quarter, or every
    4*stride-th element from four offsets), scaled up only where their means agree within `agree`, else the whole
    row summed (blocked, float32)."""
    rows = []
    for row in x.float():
        n = row.numel()
        parts = [row[q::4 * stride] for q in range(4)] if strided else \
            [row[q * (n // 4): q * (n // 4) + n // 4 // stride] for q in range(4)]
        means = [float(p.mean()) for p in parts]
        if all(abs(m - means[0]) <= agree * abs(means[0]) for m in means[1:]):
            rows.append(sum(float(p.sum()) for p in parts) * stride)
        else:
            rows.append(float(blocked(row[None])[0]))
    return torch.tensor(rows)


def sampled_sums() -> None:
    """Honest blocked sums and the agreeing samplers on the trials' distributions (issue 44's bfloat16 row sum: 8
    rows of 2^20 uniform [0, 1) values): the float64 contract's verdict and the tolerance's (rtol = atol = 1e-2,
    atol scaled by the output's rms) on each. `sparse` is the distribution that refuses the samplers."""
    from harness.values.distributions import apply_distribution

    for dtype in (torch.bfloat16, torch.float16):
        base = torch.rand(8, 1 << 20 if dtype == torch.bfloat16 else 1 << 15).to(dtype)
        for name in ("default", "block_scaled", "ramp", "sparse"):
            x = base if name == "default" else apply_distribution([base], name, 7)[0]
            exact = x.double().sum(-1)
            ref = x.sum(-1)
            ref_err = rel(ref, exact)
            print(f"row sum {dtype} n={x.shape[-1]} {name}: reference err {ref_err:.3g}")
            for label, got in (("blocked fp32 (64)", blocked(x)), ("pairwise fp32", x.float().sum(-1)),
                               ("agreeing 1/16 contiguous", agreeing_sampler(x, 16, False)),
                               ("agreeing 1/4 strided", agreeing_sampler(x, 4, True))):
                rounded = got.to(dtype).double()
                tol = 1e-2 * max(1.0, float(ref.double().norm()) / ref.numel() ** 0.5)
                within = bool(((rounded - ref.double()).abs() <= tol + 1e-2 * ref.double().abs()).all())
                report(f"{label} [{'in' if within else 'OUT OF'} tol]", dtype, got, ref_err, exact)


if __name__ == "__main__":
    sums()
    matmuls()
    pointwise()
    sampled_sums()
