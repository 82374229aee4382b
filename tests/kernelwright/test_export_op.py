"""The drop-in op (issue 35 item 3): kernelwright/export_op.py writes a package whose op runs the kernel inside the
verified envelope and the reference outside it, and whose own test passes eagerly and under
torch.compile(fullgraph=True) in a fresh process.

Builds: the bundled CPU ReLU (cached beside every other use of it) and a ReLU that drops the tail (its own
extension name, so it never evicts the bundled one's cache). The parameter route uses a pure-PyTorch ModelNew,
no build: the package does not care what ModelNew computes with, only which route a call takes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.records import Verdict
from harness.shipping.envelope import Envelope, VariantResult
from kernelbench.bundled import bundled_candidate, find_bundled
from kernelbench.problem import Problem
from kernelwright.eval_service import UsageError
from kernelwright.export_op import ExportError, export_op, package_environment, run_exported_test
from tests.conftest import tail_dropping_relu


def _run_script(out: Path, script: str, timeout: float = 500) -> dict:
    done = subprocess.run([sys.executable, "-c", script], cwd=out, env=package_environment(out), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    assert done.returncode == 0, done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_candidate_without_modelnew_is_one_honest_line(tmp_path: Path) -> None:
    relu = find_bundled("ReLU")
    with pytest.raises(ExportError) as caught:
        export_op(relu, "import torch\n\nclass Model(torch.nn.Module):\n    pass\n", tmp_path / "op",
                  candidate_name="mine.py")
    assert isinstance(caught.value, UsageError)  # the CLI boundary prints it as one line, exit status 2
    assert str(caught.value).startswith("mine.py: defines no `class ModelNew`") and "\n" not in str(caught.value)
    with pytest.raises(ExportError, match="not valid Python"):
        export_op(relu, "class ModelNew(:\n", tmp_path / "op")
    assert not (tmp_path / "op").exists()


def test_the_envelope_is_read_from_sizes_shapes_or_an_envelope(tmp_path: Path) -> None:
    relu = find_bundled("ReLU")
    source = bundled_candidate(relu).read_text()
    exported = export_op(relu, source, tmp_path / "op", envelope=[{"batch_size": 3}, [[7, 100]], {"batch_size": 16}])
    own = {"sizes": None, "inputs": [[[16, 16384], "float32", True]], "state": []}
    assert exported.envelope == [own, {"sizes": {"batch_size": 3}, "inputs": [[[3, 16384], "float32", True]],
                                       "state": []},
                                 {"sizes": None, "inputs": [[[7, 100], "float32", True]], "state": []}]
    assert exported.op_name.startswith("kernelwright::relu_") and exported.package.startswith("kw_relu_")
    config = json.loads((exported.out_dir / exported.package / "export.json").read_text())
    assert config["envelope"] == exported.envelope and config["outputs"] == "tensor"
    readme = exported.readme.read_text()
    assert f"import {exported.package}" in readme and "3x16384 float32 (batch_size=3)" in readme

    right = VariantResult(label="batch of one", sizes={"batch_size": 1, "dim": 16384}, verdict=Verdict.ACCEPTED)
    wrong = VariantResult(label="odd sizes", sizes={"batch_size": 15, "dim": 16383}, verdict=Verdict.INCORRECT)
    judged = Envelope(sizes={"batch_size": 16, "dim": 16384}, variants=[right, wrong])
    for given in (judged, judged.model_dump()):  # the Envelope, or Evaluation.envelope (its dump)
        exported = export_op(relu, source, tmp_path / "judged", envelope=given)
        assert [e["inputs"][0][0] for e in exported.envelope] == [[16, 16384], [1, 16384]]  # the wrong one left out
    with pytest.raises(ExportError, match="not among its size constants"):
        export_op(relu, source, tmp_path / "bad", envelope=[{"width": 3}])
    with pytest.raises(ExportError, match="one shape .* per input"):
        export_op(relu, source, tmp_path / "bad", envelope=[[[3, 4], [5]]])


@pytest.mark.slow
def test_the_bundled_relu_exported_passes_its_own_test_eagerly_and_compiled(tmp_path: Path) -> None:
    relu = find_bundled("ReLU")
    started = time.monotonic()
    exported = export_op(relu, bundled_candidate(relu).read_text(), tmp_path / "op")
    passed, output = run_exported_test(exported.out_dir)
    print(f"export + its test: {time.monotonic() - started:.1f} s")
    assert passed, output
    assert "ok test_eager" in output and "ok test_compile_fullgraph" in output and "ok test_opcheck" in output
    assert re.search(r"kernel calls [1-9]\d*, reference calls 0\n", output), output


PURE_GEMM = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Marked: 1000 above the reference, so a call's route shows in its output."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.linear.weight.T + self.linear.bias) + 1000.0
'''

GEMM_ROUTES = '''
import json, torch, PACKAGE as op
torch.manual_seed(0)
ref = op.reference.Model(*op.INIT_INPUTS)
mine = op.KernelModel(*op.INIT_INPUTS)
mine.load_state_dict(ref.state_dict())  # the caller's weights, which the kernel must use
x, small, strided = torch.randn(64, 512), torch.randn(5, 512), torch.randn(512, 64).T
routes = {}
with torch.no_grad():
    routes["own shape"] = torch.allclose(mine(x), ref(x) + 1000.0, atol=1e-3)
    routes["other batch"] = torch.equal(mine(small), ref(small))
    routes["non-contiguous"] = torch.equal(mine(strided), ref(strided))
    compiled = torch.compile(mine, fullgraph=True)
    routes["compiled own shape"] = torch.allclose(compiled(x), ref(x) + 1000.0, atol=1e-3)
    routes["compiled other batch"] = torch.equal(compiled(small), ref(small))
    mine.linear.weight.mul_(2.0)  # in place: the tensors the kernel holds
    ref.linear.weight.mul_(2.0)
    routes["in-place update"] = torch.allclose(mine(x), ref(x) + 1000.0, atol=1e-3)
    mine.linear.weight = torch.nn.Parameter(torch.randn(256, 512))  # another tensor: handed to the kernel
    ref.linear.weight = torch.nn.Parameter(mine.linear.weight.detach().clone())
    routes["new parameter"] = torch.allclose(mine(x), ref(x) + 1000.0, atol=1e-3)
    other = op.KernelModel(512, 128)  # not the constructor the kernel was verified with: the reference
    other_ref = op.reference.Model(512, 128)
    other_ref.load_state_dict(other.state_dict())
    routes["other constructor"] = torch.equal(other(x), other_ref(x))
y = mine(x)  # grad enabled, parameters that require grad: the reference, differentiable
routes["autograd"] = y.grad_fn is not None and torch.equal(y, ref(x))
print(json.dumps({"routes": routes, "counts": op.COUNTS}))
'''


@pytest.mark.slow
def test_calls_outside_the_envelope_go_to_the_reference_with_the_callers_weights(tmp_path: Path) -> None:
    gemm = find_bundled("Gemm_BiasAdd_ReLU")
    exported = export_op(gemm, PURE_GEMM, tmp_path / "op")
    assert exported.envelope[0]["state"] == [[[256, 512], "float32"], [[256], "float32"]]
    result = _run_script(exported.out_dir, GEMM_ROUTES.replace("PACKAGE", exported.package))
    assert result["routes"] == dict.fromkeys(result["routes"], True), result
    assert result["counts"] == {"kernel": 4, "reference": 4, "autograd": 1}  # every call counted, grads too



TAIL_ROUTES = '''
import json, torch, PACKAGE as op
from PACKAGE.candidate import ModelNew
odd = torch.randn(3, 16381)  # 49143 elements: the 7 past the last multiple of 8 are never written
odd[-1, -7:] = odd[-1, -7:].abs() + 0.5  # positive, so an unwritten (zero or stale) tail cannot look right
own = torch.randn(16, 16384)
direct = ModelNew()(odd)  # the kernel itself at a size it was never verified at
print(json.dumps({"direct wrong": not torch.equal(direct, torch.relu(odd)),
                  "op right": torch.equal(op.forward(odd), torch.relu(odd)),
                  "compiled right": torch.equal(torch.compile(op.forward, fullgraph=True)(odd), torch.relu(odd)),
                  "own shape right": torch.equal(op.forward(own), torch.relu(own)),
                  "counts": op.COUNTS}))
'''


@pytest.mark.slow
def test_a_relu_that_drops_the_tail_is_guarded_at_the_sizes_it_gets_wrong(tmp_path: Path) -> None:
    relu = find_bundled("ReLU")
    source = (tail_dropping_relu().replace('name="relu_cpu"', 'name="relu_tail_dropping_cpu"')
              .replace("kw_relu_cpu", "kw_relu_tail_dropping_cpu"))
    exported = export_op(relu, source, tmp_path / "op")  # verified at the problem's own 16 x 16384 only
    result = _run_script(exported.out_dir, TAIL_ROUTES.replace("PACKAGE", exported.package))
    assert result.pop("counts") == {"kernel": 1, "reference": 2, "autograd": 0}
    assert result == dict.fromkeys(result, True), result


TWO_OUTPUTS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Two outputs: the op's schema returns Tensor[], KernelModel a tuple."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return torch.relu(x), x.sum(dim=1)


batch_size = 4
dim = 33


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_a_model_with_two_outputs_passes_its_own_test(tmp_path: Path) -> None:
    problem = Problem(name="Two_Outputs", source=TWO_OUTPUTS)
    candidate = TWO_OUTPUTS.replace("class Model(", "class ModelNew(")  # no kernel: the routes are what is tested
    exported = export_op(problem, candidate, tmp_path / "op")
    assert json.loads((exported.out_dir / exported.package / "export.json").read_text())["outputs"] == "tensors"
    passed, output = run_exported_test(exported.out_dir)
    assert passed and "ok test_compile_fullgraph" in output and "ok test_opcheck" in output, output
