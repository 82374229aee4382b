"""Shape buckets of the drop-in op (issue 48 item 8; kernelwright/export_buckets.py): a range of sizes verified at
its corners and at samples drawn at export, routed to the kernel by the package's guard only where verified.

Builds: none of their own. The bucket-verifying test's candidates are the bundled CPU ReLU's extension (cached
beside every other use of it) with Python forwards that go wrong at some sizes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbench.bundled import find_bundled
from kernelwright.bucket_spec import BucketSpec, parse_bucket
from kernelwright.errors import UsageError
from kernelwright.export_buckets import DRAWN, draw_samples, infer_spec, plan_bucket, verify_bucket
from kernelwright.export_op import ExportError, export_op, package_environment
from tests.conftest import RELU_CANDIDATE, relu_variant


@pytest.mark.parametrize("text, says", [("batch_size=64..1", "runs backwards"), ("batch_size=1-64", "NAME=LOW..HIGH"),
                                        ("batch_size=0..8", "start at 1"), ("dim=4096", "has no range"),
                                        ("batch_size=1..8,batch_size=2..9", "named twice"), (" , ", "empty")])
def test_a_malformed_bucket_is_one_line_that_says_how_to_write_it(text: str, says: str) -> None:
    with pytest.raises(UsageError, match=says) as caught:
        parse_bucket(text)
    assert "\n" not in str(caught.value)


def test_a_bucket_routes_on_the_dimensions_that_follow_its_sizes_and_refuses_what_it_cannot_route() -> None:
    relu, gemm = find_bundled("ReLU"), find_bundled("Gemm_BiasAdd_ReLU")
    assert plan_bucket(relu, parse_bucket("batch_size=1..64,dim=1001")).inputs == [[["batch_size", 1001], "float32",
                                                                                     True]]
    both = plan_bucket(gemm, parse_bucket("batch_size=3..70"))
    assert both.inputs == [[["batch_size", 512], "float32", True]] and both.state == [[[256, 512], "float32"],
                                                                                      [[256], "float32"]]
    with pytest.raises(ExportError, match="constructor arguments"):  # the op builds its kernel with the problem's
        plan_bucket(gemm, parse_bucket("in_features=256..512"))
    with pytest.raises(ExportError, match="not among .* size constants"):
        plan_bucket(relu, parse_bucket("batch=1..64"))
    seen = [{"batch_size": 16, "dim": 16384}, {"batch_size": 1, "dim": 16384}, {"batch_size": 31, "dim": 16376}]
    assert infer_spec(relu, seen) == BucketSpec({"batch_size": (1, 31), "dim": (16376, 16384)}, {}, "inferred")
    assert infer_spec(gemm, [{"batch_size": 64, "in_features": 512}, {"batch_size": 1, "in_features": 511}]) == \
        BucketSpec({"batch_size": (1, 64)}, {}, "inferred")  # in_features changes the constructor: left out


def test_samples_hold_every_corner_and_interior_sizes_no_kernel_can_know_in_advance() -> None:
    spec = parse_bucket("batch_size=2..9000,dim=5..7")
    draws = [draw_samples(spec) for _ in range(2)]
    for points in draws:
        kinds = [kind for kind, _ in points]
        assert kinds == ["edge"] * 4 + ["prime", "not a multiple of 8", "uniform", "uniform"], kinds
        assert {tuple(p.values()) for k, p in points if k == "edge"} == {(2, 5), (2, 7), (9000, 5), (9000, 7)}
        assert all(2 <= p["batch_size"] <= 9000 and 5 <= p["dim"] <= 7 for _, p in points)
        prime = points[4][1]["batch_size"]
        assert all(prime % d for d in range(2, int(prime ** 0.5) + 1)) and points[5][1]["batch_size"] % 8
    assert draws[0][4:] != draws[1][4:]  # drawn afresh from the OS's entropy: two exports sample differently


def test_a_declared_bucket_wrong_at_a_sample_fails_the_command_and_an_inferred_one_does_not() -> None:
    from kernelwright.export_op import ExportedOp, VerifiedExport

    def result(*unverified: str) -> VerifiedExport:
        op = ExportedOp(Path("."), "kw", "kernelwright::x", "cpu", [], unverified_buckets=[{"origin": origin}
                                                                                          for origin in unverified])
        return VerifiedExport(evaluation=None, exported=op, test_passed=True)

    assert result().holds and result("inferred").holds and not result("declared").holds


GUARD = '''
import json, torch, PACKAGE as op
def inside(*shape, dtype=torch.float32, transposed=False):
    x = torch.zeros(*shape, dtype=dtype) if not transposed else torch.zeros(*reversed(shape), dtype=dtype).T
    return op.within_envelope([x], [])
print(json.dumps({"interior": inside(37, 1001), "edges": inside(1, 1001) and inside(48, 1001),
                  "past the end": inside(49, 1001), "other dim": inside(37, 1000), "half": inside(37, 1001,
                  dtype=torch.float16), "non-contiguous": inside(37, 1001, transposed=True),
                  "rank": inside(37, 1001, 1), "own": inside(16, 16384)}))
'''


def _guard(out: Path, package: str) -> dict:
    done = subprocess.run([sys.executable, "-c", GUARD.replace("PACKAGE", package)], cwd=out, text=True,
                          env=package_environment(out), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    assert done.returncode == 0, done.stdout
    return json.loads(done.stdout.strip().splitlines()[-1])


WRONG_OFF_THE_TILE = """y = relu_ext.relu_forward(x)
if x.shape[0] % 8 and x.shape[0] not in (1, 48):  # right at the edges and at multiples of 8
    y[0, 0] = y[0, 0] + 1.0
return y"""
WRONG_PAST_32 = """y = relu_ext.relu_forward(x)
if x.shape[0] > 32:  # right in the lower two thirds
    y[-1, -1] = y[-1, -1] + 1.0
return y"""


@pytest.mark.slow
def test_a_bucket_is_routed_only_where_every_sample_was_right(tmp_path: Path) -> None:
    relu = find_bundled("ReLU")
    plan = plan_bucket(relu, parse_bucket("batch_size=1..48,dim=1001"))
    records = {}
    for name, source in (("honest", RELU_CANDIDATE.read_text()), ("off the tile", relu_variant(WRONG_OFF_THE_TILE)),
                         ("past 32", relu_variant(WRONG_PAST_32))):
        records[name] = record = verify_bucket(relu, source, "cpu", _policy(), plan, draw_samples(plan.spec, 2))
        assert record["drawn"] == DRAWN and len(record["samples"]) == 4, record  # 2 edges, a prime, not of 8
        exported = export_op(relu, source, tmp_path / name.replace(" ", "_"), buckets=[record])
        config = json.loads((exported.out_dir / exported.package / "export.json").read_text())
        assert config["buckets" if record["verified"] else "unverified_buckets"] == [record]
        records[name]["routes"] = _guard(exported.out_dir, exported.package)
    honest = records["honest"]
    assert honest["verified"] and {s["verdict"] for s in honest["samples"]} == {"accepted"}, honest
    assert honest["routes"] == {"interior": True, "edges": True, "past the end": False, "other dim": False,
                                "half": False, "non-contiguous": False, "rank": False, "own": True}
    for name, caught_by in (("off the tile", {"prime", "not a multiple of 8"}), ("past 32", {"edge"})):
        record = records[name]
        wrong = {s["kind"] for s in record["samples"] if s["verdict"] == "incorrect"}
        assert not record["verified"] and caught_by <= wrong, record
        assert "accepted" in {s["verdict"] for s in record["samples"]}, record  # right where not wrong by design
        assert record["routes"]["interior"] is False and record["routes"]["own"] is True  # exact sizes still hold


def _policy():
    from harness.policy import EvalPolicy

    return EvalPolicy(skip_timing=True)
