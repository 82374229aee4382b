"""Profile + extraction (`optimize-model --plan`): regions reproduce the model's own modules, hot code that is not
a module is listed with the reason, and a wrong reconstruction is caught before anything is optimized."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelbench.problem import load_problem
from regions import constructors
from regions.extract import extract
from regions.model_file import ModelFileError, load_model_file
from regions.plan import plan_model
from regions.profile import profile_model

BLOCK = Path(__file__).parents[2] / "regions" / "examples" / "transformer_block.py"

SMALL = '''
import torch
import torch.nn as nn

SCALE = 3.0

class Odd(nn.Module):
    def forward(self, x):
        return x * 2

class Rms(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.dim, self.eps = dim, eps
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

class Forgets(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.f = factor

    def forward(self, x):
        return x * self.f

class Global(nn.Module):
    def forward(self, x):
        return x * SCALE

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32), nn.ReLU(inplace=True))
        self.norm = nn.LayerNorm(32)
        self.odd = Odd()
        self.rms = Rms(32, eps=1e-3)
        self.forgets = Forgets(0.5)
        self.glob = Global()
        self.same = nn.Identity()

    def forward(self, x):
        return self.same(self.glob(self.forgets(self.rms(self.odd(self.norm(self.body(x))))))).tanh()

def get_init_inputs():
    return []

def get_input_sets():
    return [(3, [torch.randn(4, 32)]), (1, [torch.randn(2, 5, 32)])]
'''


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.py"
    path.write_text(SMALL)
    return path


def test_plan_writes_problems_that_reproduce_the_modules(small: Path, tmp_path: Path) -> None:
    plan = plan_model(small, "cpu", tmp_path / "out", min_share=0.0, max_regions=8)
    assert [s["weight"] for s in plan.per_set] == [0.75, 0.25]
    slugs = {r["slug"]: r for r in plan.regions}
    chain = slugs["body_0_linear_gelu"]  # a Linear and the pointwise module after it: one region
    assert chain["paths"] == ["body.0", "body.1"] and "reproduces" in chain["fidelity"]
    assert "norm_layernorm" in slugs and "body_2_linear" in slugs
    problem = load_problem(chain["problem"])  # a KernelBench problem the rest of the tools read
    assert "nn.Linear(32, 64, bias=True)" in problem.source and Path(chain["state"]).is_file()
    reasons = {s["path"]: s["reason"] for s in plan.unhandled + plan.cold}
    assert "in-place" in reasons["body.3"]  # never silently dropped
    assert "no constructor known" in reasons["same"]
    assert "kept as attributes" in reasons["forgets"]  # Forgets(factor) stored it as .f: not rebuilt
    assert "NameError" in reasons["glob"]  # its class reads the file's global SCALE: the fidelity check runs it
    rms = slugs["rms_rms"]  # a module of the user's own: its class copied in, rebuilt from its attributes
    assert "class Rms(nn.Module)" in load_problem(rms["problem"]).source and "Rms(dim=32, eps=0.001)" in \
        load_problem(rms["problem"]).source and "reproduces" in rms["fidelity"]
    assert "odd_odd" in slugs
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["regions"]


def test_a_wrong_reconstruction_is_caught(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fidelity check can fail: a GELU rebuilt with the tanh approximation, a Linear without its bias."""
    monkeypatch.setitem(constructors.CONSTRUCTORS, "GELU", lambda m: "nn.GELU(approximate='tanh')")
    monkeypatch.setitem(constructors.CONSTRUCTORS, "LayerNorm", lambda m: "nn.LayerNorm(32, bias=False)")
    model_file = load_model_file(small)
    extraction = extract(profile_model(model_file, "cpu"), model_file, min_share=0.0, max_regions=8)
    slugs = {r.slug for r in extraction.regions}
    assert "body_2_linear" in slugs and not {"body_0_linear_gelu", "norm_layernorm"} & slugs  # the honest stay
    reasons = {s.path: s.reason for s in extraction.unhandled}
    assert "differs from the model's" in reasons["body.0 -> body.1"]
    assert "parameters are not the modules'" in reasons["norm"]


def test_bundled_block_names_its_attention_arithmetic(tmp_path: Path) -> None:
    plan = plan_model(BLOCK, "cpu", tmp_path, min_share=0.0, max_regions=8)
    assert {"mlp_1_swiglu", "attn_softmax_softmax", "norm1_layernorm"} <= {r["slug"] for r in plan.regions}
    assert any(s["path"] == "attn" and "Attention.forward itself" in s["reason"] for s in plan.unhandled + plan.cold)


def test_a_file_without_inputs_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(ModelFileError, match="get_input_sets"):
        load_model_file(path)
