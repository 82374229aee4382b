"""Composition (patched.py) and the end-to-end reading: the patched model computes what the model computes at
every input set, its kernel runs only inside the verified envelope with the model's own (trained) weights, the
file passes the harness's static policy, and a region whose gain does not survive end to end is dropped."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from harness.policy import EvalPolicy
from harness.verification.static_check import check_candidate
from kernelbench.problem import load_problem
from kernelbench.shrink import rewrite_constants
from kernelwright.export_op import signatures
from regions.compose import Accepted, compose, namespaced, strip_input_functions
from regions.model_file import load_model_file
from regions.plan import plan_model
from regions.verify import EndToEnd, SetResult, attribute, combine, predicted

BLOCK = Path(__file__).parents[2] / "regions" / "examples" / "transformer_block.py"

# an honest stand-in for a region's kernel (Python, so nothing is built): the MLP's first Linear, from m0's weights
CHAIN = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "// built elsewhere"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.m0 = nn.Linear(16, 4096, bias=True)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.m0.weight, self.m0.bias)
'''


def _run(source: str) -> types.ModuleType:
    module = types.ModuleType("kw_test_patched")
    sys.modules[module.__name__] = module
    exec(compile(source, "patched.py", "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Accepted]:
    plan = plan_model(BLOCK, "cpu", tmp_path_factory.mktemp("plan"), min_share=0.0, max_regions=8)
    region = next(r for r in plan.regions if r["slug"] == "mlp_0_linear")
    problem = load_problem(region["problem"])
    served = {"batch_size": 8, "dim1": 32}  # set 2's shape only (whichever set the problem is written at): set 1 is outside
    envelope = [signatures(problem, rewrite_constants(problem.source, served), served)]
    accepted = Accepted(region["slug"], region["paths"], CHAIN, envelope, "cpu", 1.5)
    model_file = load_model_file(BLOCK)
    return compose(model_file.source, model_file.path, [accepted]), accepted


def test_patched_model_matches_and_guards(composed: tuple[str, Accepted]) -> None:
    source, accepted = composed
    patched, user = _run(source), _run(BLOCK.read_text())
    torch.manual_seed(0)
    reference = user.Model(*user.get_init_inputs()).eval()
    torch.manual_seed(1)  # other weights: the user's trained ones are loaded, and must reach the kernel
    model = patched.ModelNew(*user.get_init_inputs()).eval()
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict(reference.state_dict())
    counts = model.kw_regions[accepted.slug].counts
    with torch.no_grad():
        for index, (_, inputs) in enumerate(user.get_input_sets()):
            torch.testing.assert_close(model(*inputs), reference(*inputs), rtol=1e-5, atol=1e-5)
            # set 1 (2x128 tokens) is outside the kernel's verified envelope: the model's own modules ran
            assert counts == ({"kernel": 0, "reference": 1} if index == 0 else {"kernel": 1, "reference": 1})
    x = torch.randn(8, 32, 16, requires_grad=True)  # autograd in play: the reference, differentiable
    model(x).sum().backward()
    assert counts["reference"] == 2 and x.grad is not None


def test_patched_file_passes_the_static_policy(composed: tuple[str, Accepted]) -> None:
    source, _ = composed
    kernel = Path(__file__).parents[2] / "agent" / "examples" / "light_cpu.py"
    with_build = source.replace("cpp_source = '// built elsewhere'", "cpp_source = '// built elsewhere'\n" +
                                kernel.read_text().split("class ModelNew")[0])
    report = check_candidate(with_build, EvalPolicy())
    assert report.verdict is None, report.errors
    assert "def get_input_sets" not in source and "def get_inputs" not in source


def test_two_regions_do_not_collide() -> None:
    first, second = namespaced(CHAIN, "_kw_r1_"), namespaced(CHAIN, "_kw_r2_")
    assert "class _kw_r1_ModelNew" in first and "_kw_r2_cpp_source" in second and "class ModelNew" not in first
    assert "def get_inputs" not in strip_input_functions("import torch\ndef get_inputs():\n    return []\nx = 1\n")


def _sets(*speedups: float, verdict: str = "accepted") -> EndToEnd:
    sets = [SetResult(i, w, verdict, s, (s * 0.95, s * 1.05), 10.0, 10.0 / s)
            for i, (w, s) in enumerate(zip((0.25, 0.75), speedups))]
    end = EndToEnd(["r"], sets)
    end.speedup, end.speedup_ci = combine(sets)
    end.significant = not (end.speedup_ci[0] <= 1.0 <= end.speedup_ci[1])
    return end


def test_combine_weights_time_not_ratios() -> None:
    speedup, interval = combine(_sets(2.0, 1.0).sets)
    assert speedup == pytest.approx(10.0 / (0.25 * 5.0 + 0.75 * 10.0))
    assert interval[0] < speedup < interval[1]
    assert predicted([(0.5, 2.0)]) == pytest.approx(1 / 0.75)


def test_attribution_keeps_survivors_and_drops_the_rest(composed: tuple[str, Accepted]) -> None:
    _, region = composed
    served = {0: [2, 128, 16], 1: [8, 32, 16]}
    weights = {0: 0.25, 1: 0.75}
    kept = attribute(region, 0.4, served, "float32", weights, _sets(1.2, 1.2), region_ms=4.0)
    assert kept.kept and kept.predicted == pytest.approx(predicted([(0.4, 1.5)]))
    # 4 ms at 1.5x promised 1.333 ms; the model saved 10 - 10/1.2 = 1.667 ms per forward
    assert "promised +1.333 ms" in kept.notes[0] and "measured +1.667 ms" in kept.notes[0]
    assert "input set(s) 1 (25% of the calls) are outside" in kept.notes[1]
    slower = attribute(region, 0.4, served, "float32", weights, _sets(0.9, 0.95))
    assert not slower.kept and "does not survive end to end" in slower.notes[-1]
    unresolved = _sets(1.05, 1.05)
    unresolved.speedup_ci, unresolved.significant = (0.72, 1.52), False  # above 1.0, but it may be a loss
    noisy = attribute(region, 0.4, served, "float32", weights, unresolved)
    assert not noisy.kept and "not significant" in noisy.notes[-1]
    failed = _sets(1.2, 1.2)
    failed.sets[1].verdict, failed.sets[1].reason = "incorrect", "max abs error 3.1"
    broken = attribute(region, 0.4, served, "float32", weights, failed)
    assert not broken.kept and "incorrect at input set 2" in broken.notes[-1]


def test_report_shows_time_per_region_before_and_after(tmp_path: Path, composed: tuple[str, Accepted]) -> None:
    from dataclasses import asdict

    from reports.model_report import write_model_report

    _, region = composed
    record = attribute(region, 0.4, {1: [8, 32, 16]}, "float32", {0: 0.25, 1: 0.75}, _sets(1.2, 1.2), 4.0)
    result = {"model": "block.py", "device": "cpu", "regions": [asdict(record)], "kept": [region.slug],
              "predicted": record.predicted, "end_to_end": asdict(record.measured), "eval_command": "kernelwright eval"}
    page = write_model_report(tmp_path, result, [{"slug": region.slug, "ms": 4.0}]).read_text()
    assert "Time per region, before and after" in page and "<svg" in page
    assert "4.000" in page and "2.667" in page and "2.333" in page  # before, after predicted (1.5x), after measured
    assert "| mlp_0_linear | 40.0% | 4.000 | 1.500x | 2.667 |" in (tmp_path / "report.md").read_text()


def test_regions_kept_alone_but_losing_together_leave_the_fastest(tmp_path: Path, composed: tuple[str, Accepted],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The decision logic of verify_model, with the harness's measurements stood in for (each is an Evaluation
    read elsewhere): two regions each faster alone, slower together -> only the faster one stays."""
    import regions.verify
    from kernelwright.model_service import verify_model
    from regions.plan import Plan

    _, region = composed
    first, second = region, Accepted("other", ["attn.qkv"], CHAIN, region.envelope, "cpu", 1.3)
    measured = {("mlp_0_linear",): 1.2, ("other",): 1.1, ("mlp_0_linear", "other"): 0.9}
    monkeypatch.setattr(regions.verify, "judge_patch",
                        lambda _m, chosen, *_a, **_k: ("", _sets(*[measured[tuple(a.slug for a in chosen)]] * 2)))
    info = {"share": 0.3, "ms": 3.0, "dtype": "float32", "served": {"0": [2, 128, 16], "1": [8, 32, 16]}}
    plan = Plan(str(BLOCK), "cpu", str(tmp_path), 10.0, [], [], [],
                [{"slug": "mlp_0_linear", **info}, {"slug": "other", **info}], [], [])
    result = verify_model(plan, [first, second], EvalPolicy(), compile_baseline=False)
    assert result["kept"] == ["mlp_0_linear"] and result["end_to_end"]["speedup"] == pytest.approx(1.2)
    other = next(r for r in result["regions"] if r["slug"] == "other")
    assert not other["kept"] and "together" in other["notes"][-1]
    assert "_kw_r1_ModelNew" in (tmp_path / "patched.py").read_text()
    assert (tmp_path / "report.html").is_file()


def test_the_whole_model_is_judged_without_the_share_floor_with_the_kernel_the_knockout_and_more_timing(
        composed: tuple[str, Accepted], monkeypatch: pytest.MonkeyPatch) -> None:
    """A region's kernel does a small part of the whole model's time by design: only the work-share floor of a
    kernel's own problem is lowered for patched.py (the rest of forward is the user's modules); a kernel must still
    be built (even where the caller's policy did not ask for one) and the knockout still holds."""
    import regions.verify

    _, region = composed
    seen: list[EvalPolicy] = []
    monkeypatch.setattr(regions.verify, "evaluate", lambda _p, _s, _d, policy: seen.append(policy))
    monkeypatch.setattr(regions.verify, "_set_result", lambda index, weight, _e: SetResult(index, weight, "crash", None, None, None, None))
    regions.verify.judge_patch(load_model_file(BLOCK), [region], "cpu", EvalPolicy(require_custom_kernel=False))
    assert len(seen) == 2 and all(p.require_custom_kernel and p.min_kernel_share == 0.0 and p.knockout and
                                  p.hardening and p.static_policy == "default" and p.noise_floor for p in seen)
    assert all(p.process_pairs >= 6 and p.timing_budget_s >= 4.0 for p in seen)  # more measurement, never less
    assert all(p.timeout_s >= 2 * EvalPolicy().timeout_s for p in seen)  # the sets' clocks, one after another
    longer = regions.verify.whole_model_policy(EvalPolicy(process_pairs=8, timing_budget_s=10.0))
    assert (longer.process_pairs, longer.timing_budget_s) == (8, 10.0)
    assert EvalPolicy().min_kernel_share == 0.05  # a kernel's own problem keeps its floor


def test_a_patched_model_that_never_builds_a_kernel_is_refused(composed: tuple[str, Accepted]) -> None:
    """The whole-model policy lowers the share floor, not the kernel requirement: a patched model whose region
    never calls load_inline (CHAIN: PyTorch's linear behind the guard) is refused statically, as it was not when
    whole-model judging turned require_custom_kernel off. The run-time form (a build statically present, never
    run) is tests/regions/test_whole_model_policy.py's."""
    from regions.verify import whole_model_policy

    source, _ = composed
    report = check_candidate(source, whole_model_policy(EvalPolicy()))
    assert report.verdict is not None and report.verdict.value == "rejected"
    assert any(f.check.value == "no-kernel" and f.fatal for f in report.findings), report.findings
    assert check_candidate(source, EvalPolicy(require_custom_kernel=False)).verdict is None  # the old shortcut
