"""The `sparse` distribution (issue 44): the problem's own sample unchanged but for a few spikes at random
positions, so nothing in a part of the input tells a kernel what the part it skips holds."""

from __future__ import annotations

import torch

from harness.values.distributions import apply_distribution


def test_sparse_keeps_the_sample_but_for_about_two_spikes_per_row_each_half_a_rows_mass() -> None:
    sample = torch.rand(64, 4096)
    spiked = apply_distribution([sample], "sparse", 3)[0]
    changed = spiked != sample
    assert 64 <= int(changed.sum()) <= 2 * 64  # 128 positions drawn, a few twice
    assert bool((spiked[changed] > 0.4 * sample.sum(1).mean()).all())  # positive: the sample is
    assert torch.equal(spiked[~changed], sample[~changed])
    rows = changed.any(1)
    assert 0.7 < float(rows.float().mean()) < 0.98  # most rows hold one or more, some none (Poisson, mean 2)


def test_sparse_spikes_take_both_signs_on_a_signed_sample_and_stay_finite_in_half_precision() -> None:
    signed = apply_distribution([torch.randn(16, 8192)], "sparse", 5)[0]
    spikes = signed[signed.abs() > 100]
    assert (spikes > 0).any() and (spikes < 0).any()
    half = apply_distribution([torch.rand(4, 1 << 16).half()], "sparse", 5)[0]
    assert bool(torch.isfinite(half).all()) and bool(torch.isfinite(half.float().sum(1)).all())


def test_a_sampler_that_reads_a_part_only_where_its_parts_agree_misses_them() -> None:
    """The red team's row sum, in PyTorch: the first 1/16 of each quarter, scaled up where the four means agree."""
    x = apply_distribution([torch.rand(8, 1 << 16)], "sparse", 11)[0].double()
    quarter = x.shape[1] // 4
    parts = [x[:, q * quarter: q * quarter + quarter // 16] for q in range(4)]
    means = torch.stack([p.mean(1) for p in parts])
    agree = ((means - means[0]).abs() <= 0.1 * means[0].abs()).all(0)  # 2% at 2^20 a row, 10% here
    estimate = torch.where(agree, sum(p.sum(1) for p in parts) * 16, x.sum(1))
    assert float(((estimate - x.sum(1)).abs() / x.sum(1)).max()) > 0.2
