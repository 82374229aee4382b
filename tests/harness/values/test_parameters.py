"""Parameters and buffers redrawn (structured ones around their init scale, the others i.i.d. at their own mean
and std), set in a candidate by name or by shape and init values (harness/values/parameters.py); the structured
and widened input distributions (harness/values/distributions.py)."""

from __future__ import annotations

import torch
import torch.nn as nn

from harness.values.distributions import apply_distribution
from harness.values.parameters import assign, needs_twin, redraw, seeded, value_of


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(64, 32)
        nn.init.zeros_(self.proj.bias)
        self.gate = nn.Parameter(torch.zeros(32, 64))
        self.scale = nn.Parameter(torch.ones(32))


def test_constant_parameters_are_redrawn_at_their_layers_scale() -> None:
    model = _Model()
    weight = model.proj.weight.detach().clone()
    redrawn = redraw(model, 7, everything=False)
    assert set(redrawn) == {"proj.bias", "gate", "scale"} and torch.equal(model.proj.weight, weight)
    bias_rms = float(model.proj.bias.detach().pow(2).mean().sqrt())
    weight_rms = float(weight.pow(2).mean().sqrt())
    assert 0.5 * weight_rms < bias_rms < 2 * weight_rms  # the zero bias at its sibling weight's scale
    assert 0.05 < float(model.gate.detach().pow(2).mean().sqrt()) < 0.25  # a zero matrix at 1/sqrt(fan in) = 0.125
    assert bool((model.scale >= 0.5).all() and (model.scale <= 1.5).all()) and model.scale.std() > 0.1
    assert redrawn["scale"]["init"] == 1.0 and redrawn["gate"]["init"] == 0.0
    again = _Model()
    redraw(again, 7, everything=False)
    assert torch.equal(again.gate, model.gate)  # the same seed, the same values (the children set them anyway)


def test_a_candidate_gets_them_by_name_or_by_shape_and_init_value_and_one_holding_none_keeps_its_own() -> None:
    redrawn = redraw(_Model(), 3, everything=False)

    class Renamed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(64, 32)
            nn.init.zeros_(self.proj.bias)
            self.mask = nn.Parameter(torch.zeros(32, 64))  # the gate, by another name

    renamed = Renamed()
    assert assign(renamed, redrawn) == ["scale"]  # held nowhere: it keeps nothing of it
    assert torch.equal(renamed.mask, redrawn["gate"]["value"]) and torch.equal(renamed.proj.bias,
                                                                                redrawn["proj.bias"]["value"])


def test_structured_distributions_keep_the_samples_domain_and_make_parts_differ() -> None:
    sample = [torch.rand(64, 256), torch.tensor([3, 1])]
    ramp, counts = apply_distribution(sample, "ramp", 1)
    assert torch.equal(ramp.reshape(-1), sample[0].reshape(-1).sort().values) and torch.equal(counts, sample[1])
    blocks = apply_distribution(sample, "block_scaled", 1)[0]
    assert float(blocks.min()) >= 0 and float(blocks.max()) <= 1  # probabilities stay probabilities
    means = blocks.reshape(16, -1).mean(1)
    assert float(means.max() / means.min()) > 5  # the blocks differ by orders of magnitude


class _Structured(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Parameter(torch.empty(64, 64))
        nn.init.eye_(self.mix)
        self.dense = nn.Parameter(torch.randn(64, 64))
        self.register_buffer("shift", torch.zeros(64))
        self.register_buffer("mask", torch.tril(torch.ones(8, 8)))  # a two-valued buffer: the operator's definition
        self.register_buffer("steps", torch.zeros(1, dtype=torch.long))


def test_an_identity_parameter_and_a_zero_buffer_are_redrawn_and_random_ones_and_masks_are_not() -> None:
    model = _Structured()
    dense, mask = model.dense.detach().clone(), model.mask.clone()
    redrawn = redraw(model, 5, everything=False)
    assert set(redrawn) == {"mix", "shift"}
    assert torch.equal(model.dense, dense) and torch.equal(model.mask, mask) and int(model.steps) == 0
    noise = model.mix.detach() - torch.eye(64)
    assert 0.05 < float(noise.pow(2).mean().sqrt()) < 0.25  # unit-valued: noise at 1/sqrt(fan in) = 0.125
    assert float(model.shift.std()) > 0.1


def test_a_candidate_holding_the_identity_as_a_buffer_under_another_name_gets_it() -> None:
    redrawn = redraw(_Structured(), 9, everything=False)

    class Candidate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("weight", torch.eye(64))  # the reference's `mix`, as a buffer, renamed
            self.offset = nn.Parameter(torch.zeros(64))  # its `shift`, as a parameter
            self.other = nn.Parameter(torch.ones(64, 64))  # the shape, not the init values: never matched

    candidate = Candidate()
    assert assign(candidate, redrawn) == []
    assert torch.equal(candidate.weight, redrawn["mix"]["value"])
    assert torch.equal(candidate.offset, redrawn["shift"]["value"]) and bool((candidate.other == 1).all())


def test_a_constant_tensor_attribute_is_redrawn_and_scalars_random_ones_and_views_are_not() -> None:
    class Attributes(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.randn(16, 16))
            self.gain = torch.ones(16)  # a plain attribute: in no state dict
            self.inner = nn.Identity()
            self.inner.floor = torch.zeros(4, 4)  # a submodule's
            self.eps = torch.tensor([1e-5])  # one element: a scalar constant, a literal in tensor form
            self.state = torch.randn(16)  # random: fresh per evaluation already
            self.row = torch.ones(2, 16)[0]  # a view: its base's
            self.steps = torch.zeros(16, dtype=torch.long)  # not floating

    model = Attributes()
    redrawn = redraw(model, 3, everything=False)
    assert set(redrawn) == {"gain", "inner.floor"}
    assert float(model.gain.std()) > 0.1 and float(model.inner.floor.std()) > 0.01
    assert torch.equal(model.eps, torch.tensor([1e-5])) and bool((model.row == 1).all()) and not model.steps.any()


class _Random(nn.Module):
    """Random state with structure every draw of its init shares, beside the operator's definition."""

    def __init__(self) -> None:
        super().__init__()
        self.tied = nn.Parameter(torch.empty(64, 64))
        nn.init.orthogonal_(self.tied)  # W W^T = I
        self.low = nn.Parameter(torch.randn(64, 4) @ torch.randn(4, 64))  # rank 4
        self.std = nn.Parameter(torch.rand(64) + 0.5)  # non-negative: a scale
        self.register_buffer("noise", torch.randn(32))  # random: a seed draws it
        self.register_buffer("waves", torch.sin(torch.arange(32.0)))  # the definition: the same under every seed
        self.eps = nn.Parameter(torch.randn(2))  # fewer than four elements: a scalar pair


def _built(seed: int) -> _Random:
    torch.manual_seed(seed)
    return _Random()


def test_random_parameters_and_buffers_are_redrawn_iid_and_no_structure_of_their_init_survives() -> None:
    model, twin = _built(1), _built(2)
    assert needs_twin(model) and seeded(model, twin) == {"noise"}
    tied, low, scale, waves, eps = (t.detach().clone() for t in (model.tied, model.low, model.std, model.waves,
                                                                 model.eps))
    redrawn = redraw(model, 11, seeded_names=seeded(model, twin))
    assert set(redrawn) == {"tied", "low", "std", "noise"}
    with torch.no_grad():
        assert float((model.tied @ model.tied.t() - torch.eye(64)).abs().max()) > 0.3  # no longer orthogonal
        assert int(torch.linalg.matrix_rank(model.low)) > 32 and int(torch.linalg.matrix_rank(low)) == 4
        assert bool((model.std >= 0).all()) and abs(float(model.std.mean() - scale.mean())) < 0.15
        assert abs(float(model.tied.std()) - float(tied.std())) < 0.02  # its own scale kept
    assert torch.equal(model.waves, waves) and torch.equal(model.eps, eps)


def test_a_candidate_gets_random_state_by_name_or_by_its_init_values_and_the_draw_is_the_same_everywhere() -> None:
    redrawn = redraw(_built(1), 11, seeded_names={"noise"})

    class Renamed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Parameter(torch.empty(64, 64))
            nn.init.orthogonal_(self.q)  # the reference's `tied`, by another name, at its init values
            self.low = nn.Parameter(torch.randn(64, 4) @ torch.randn(4, 64))
            self.t = nn.Parameter(torch.zeros(64, 64))  # the shape, not the init values: never matched

    torch.manual_seed(1)
    candidate = Renamed()
    assert sorted(assign(candidate, redrawn)) == ["noise", "std"]
    assert torch.equal(candidate.q, value_of(redrawn["tied"])) and torch.equal(candidate.low, value_of(redrawn["low"]))
    assert not candidate.t.any()
    threads = torch.get_num_threads()
    try:  # a child's thread count is not the parent's: the recipe draws the same bits
        torch.set_num_threads(1)
        one = value_of({**redrawn["tied"], "shape": [1024, 1024]})
        torch.set_num_threads(max(2, threads))
        assert torch.equal(one, value_of({**redrawn["tied"], "shape": [1024, 1024]}))
    finally:
        torch.set_num_threads(threads)


def test_uniform_and_large_reach_past_the_samples_range() -> None:
    sample = [torch.rand(64, 256)]
    wide = apply_distribution(sample, "uniform", 1, keep_sign=False, reach=4.0)[0]
    assert float(wide.min()) < -3 and float(wide.max()) > 3
    one_sided = apply_distribution(sample, "uniform", 1, keep_sign=True, reach=4.0)[0]
    assert float(one_sided.min()) >= 0 and float(one_sided.max()) > 3
    large = apply_distribution(sample, "large", 1, keep_sign=False, reach=30.0)[0]
    assert float(large.min()) < -25 and float(large.max()) > 25  # both signs, magnitudes up to 30
    assert float(apply_distribution(sample, "large", 1)[0].max()) > 900  # 1000 unless told


def test_a_constant_boolean_mask_is_redrawn_and_masks_of_two_values_and_integers_are_not() -> None:
    class Masks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("keep", torch.ones(4096, dtype=torch.bool))  # a pruning mask at init
            self.register_buffer("causal", torch.tril(torch.ones(8, 8, dtype=torch.bool)))  # the definition
            self.register_buffer("lengths", torch.full((16,), 3))  # integers: indices, counts

    model = Masks()
    redrawn = redraw(model, 4, everything=False)
    assert set(redrawn) == {"keep"} and 0.65 < float(model.keep.double().mean()) < 0.85
    assert torch.equal(model.causal, torch.tril(torch.ones(8, 8, dtype=torch.bool))) and bool((model.lengths == 3).all())

    class Renamed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("alive", torch.ones(4096, dtype=torch.bool))

    renamed = Renamed()
    assert assign(renamed, redrawn) == [] and torch.equal(renamed.alive, model.keep)
