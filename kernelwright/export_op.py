"""A verified kernel as a drop-in op (issue 35 item 3): `export_op()` writes a small Python package, and
`run_exported_test()` runs the package's own test in a fresh process.

The package (`OUT/<package>/`, README at `OUT/README.md`):
- `candidate.py`, `reference.py`: the candidate and the problem, verbatim;
- `__init__.py`: a `torch.library` custom op `kernelwright::<name>(Tensor[] inputs, Tensor[] state)`, where
  `state` is the model's parameters then buffers. Its implementation calls the candidate's `ModelNew` (built once,
  its extension compiled or loaded on the first call) with the caller's tensors in place of its own (bound until
  other tensor objects come; `torch.func.functional_call` where weights are tied): parameters are the op's inputs,
  so the user's own weights reach the kernel, and
  `KernelModel`, a subclass of the problem's `Model` (same constructor, same state_dict), holds them and is what a
  user drops into their model. A guard runs the kernel only at the verified envelope (input shapes, dtypes and
  contiguity, parameter shapes and dtypes, device type; exact sizes, or inside a verified shape bucket:
  kernelwright/export_buckets.py) and the reference `Model` everywhere else, counting both (`COUNTS`). Its fake implementation runs the reference `Model` on the fake tensors, so `torch.compile(fullgraph=True)`
  traces it; in eager mode KernelModel calls the implementation directly (no dispatcher round trip);
- `export.json`: the op's name, device, envelope (exact sizes; buckets with the sizes sampled and their verdicts),
  output kind and tolerances;
- `test_op.py`: the op against the reference on fresh inputs, eagerly and under `torch.compile(fullgraph=True)`,
  torch.library.opcheck (schema, fake implementation), and on a GPU whether CUDA-graph capture works.

Exporting never runs the candidate (untrusted code stays out of this process): it parses it for `ModelNew`, and runs
only the reference problem, on the meta device, to read the envelope's shapes. The package's test runs it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any, Sequence

from harness.policy import EvalPolicy
from kernelbench.problem import Problem
from kernelbench.shrink import rewrite_constants, size_constants
from kernelwright import export_op_templates as templates
from kernelwright.export_signatures import ExportError, signatures  # noqa: F401 - the export's errors, re-exported

NAMESPACE = "kernelwright"
TEST_MODULE = "test_op"
_ENV_KEEP = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "CC", "CXX", "MAX_JOBS", "TORCH_EXTENSIONS_DIR",
             "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")

# One verified size: the problem's size constants ({"batch_size": 1, "dim": 4097}), or one shape per tensor input.
EnvelopeEntry = dict[str, int] | Sequence[Sequence[int]]


@dataclass(frozen=True)
class ExportedOp:
    """What `export_op` wrote."""

    out_dir: Path
    package: str  # import name; OUT is what goes on PYTHONPATH
    op_name: str  # kernelwright::<name>
    device: str
    envelope: list[dict[str, Any]]  # per verified size: sizes (or None), input and state signatures
    files: list[Path] = field(default_factory=list)
    buckets: list[dict[str, Any]] = field(default_factory=list)  # verified buckets: the guard routes inside them
    unverified_buckets: list[dict[str, Any]] = field(default_factory=list)  # wrong at a sample: not routed
    not_routed: list[dict[str, Any]] = field(default_factory=list)  # verified sizes with other constructor arguments

    @property
    def readme(self) -> Path:
        return self.out_dir / "README.md"

    @property
    def test_command(self) -> str:
        return f"PYTHONPATH={self.out_dir} python -m {self.package}.{TEST_MODULE}"


def export_op(problem: Problem, candidate_source: str, out_dir: Path | str,
              envelope: Any = None, device: str = "cpu", package: str | None = None,
              policy: EvalPolicy | None = None, candidate_name: str = "candidate",
              buckets: Sequence[dict[str, Any]] = ()) -> ExportedOp:
    """Write the drop-in op package for `candidate_source` (a KernelBench `ModelNew` file) into `out_dir`.

    `envelope`: where the kernel was verified: None (the problem's own sizes), a list of size dicts (the problem's
    size constants) or of shape lists (one shape per tensor input, the problem's own dtypes and parameters), or a
    harness `Envelope` or its dump (`Evaluation.envelope`): the problem's own sizes and every variant judged
    correct. A size whose constructor arguments (get_init_inputs) differ from the problem's is recorded but not
    routed: the op builds the kernel's model once, with the problem's own. `buckets`: records from
    kernelwright/export_buckets.py's `verify_bucket`; the guard routes only inside those verified. `device`: the
    device type the kernel was verified on. Raises ExportError, with what to fix, where it cannot export."""
    _check_candidate(candidate_source, candidate_name)
    policy = policy or EvalPolicy()
    own = signatures(problem, problem.source, None)
    entries = [own] + [_entry(problem, given, own) for given in _given_entries(envelope)]
    keys = [(e["inputs"], e["state"]) for e in entries]
    unique = [e for i, e in enumerate(entries) if keys[i] not in keys[:i]]  # the same shapes by another name once
    routed = [e for e in unique if e["init_key"] == own["init_key"]]
    not_routed = [{"sizes": e["sizes"], "why": f"its constructor arguments {e['init'] or e['init_key']} are not "
                   f"the op's {own['init'] or own['init_key']}"}
                  for e in unique if e["init_key"] != own["init_key"]]
    stem = _snake(problem.name)
    digest = hashlib.sha256(candidate_source.encode()).hexdigest()[:8]
    package = package or f"kw_{stem}_{digest}"
    if not package.isidentifier():
        raise ExportError(f"package name {package!r} is not a Python identifier")
    op_name = f"{NAMESPACE}::{stem}_{digest}"
    out = Path(out_dir).resolve()
    folder = out / package
    config = {"op": op_name, "device": device, "outputs": own["outputs"], "problem": problem.key,
              "tolerance": {"float": policy.atol_fp32, "half": policy.atol_half},
              "envelope": [{k: e[k] for k in ("sizes", "inputs", "state")} for e in routed],
              "buckets": [b for b in buckets if b["verified"]],  # the only ones the guard reads
              "unverified_buckets": [b for b in buckets if not b["verified"]], "not_routed": not_routed}
    texts = {folder / "__init__.py": templates.PACKAGE_INIT,
             folder / f"{TEST_MODULE}.py": templates.PACKAGE_TEST.replace("PACKAGE", package),
             folder / "candidate.py": candidate_source,
             folder / "reference.py": problem.source,
             folder / "export.json": json.dumps(config, indent=2) + "\n",
             out / "README.md": _readme(problem, package, op_name, device, routed, out, candidate_name, own,
                                        config["buckets"])}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in texts.items():
            path.write_text(text)
    except OSError as exc:
        raise ExportError(f"cannot write the op package to {out}: {exc}") from None
    return ExportedOp(out, package, op_name, device, config["envelope"], list(texts), config["buckets"],
                      config["unverified_buckets"], not_routed)


def run_exported_test(out_dir: Path | str, package: str | None = None, timeout: float = 900.0) -> tuple[bool, str]:
    """Run the package's own test (`python -m <package>.test_op`) in a fresh process: a clean environment (no
    secrets; PATH with this interpreter's folder first, so ninja is found) plus PYTHONPATH=out_dir. Returns
    (passed, its output: stdout and stderr together)."""
    out = Path(out_dir).resolve()
    if package is None:
        found = sorted(p.parent.name for p in out.glob(f"*/{TEST_MODULE}.py") if (p.parent / "export.json").is_file())
        if len(found) != 1:
            return False, f"{out}: expected one exported op package, found {found or 'none'}"
        package = found[0]
    env = package_environment(out)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", f"{package}.{TEST_MODULE}"], cwd=out, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        return False, f"{output}\ntimed out after {timeout:.0f} s"
    seconds = time.monotonic() - started
    return done.returncode == 0, f"{done.stdout}\n[exit status {done.returncode} after {seconds:.1f} s]"


def package_environment(out_dir: Path | str) -> dict[str, str]:
    """A clean environment for a process that imports the package: no secrets, only what a build needs (PATH with
    this interpreter's folder first, so ninja is found; HOME and TORCH_EXTENSIONS_DIR, so builds are cached; the
    compiler's and CUDA's variables), plus PYTHONPATH=out_dir."""
    env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    env["PYTHONPATH"] = str(Path(out_dir).resolve())
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _check_candidate(source: str, name: str) -> None:
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        raise ExportError(f"{name}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body):
        raise ExportError(f"{name}: defines no `class ModelNew`; a candidate to export is a KernelBench file whose "
                          "ModelNew calls the kernel")


def _snake(name: str) -> str:
    snake = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower()
    return snake if snake and not snake[0].isdigit() else f"p_{snake}"


def _given_entries(envelope: Any) -> list[EnvelopeEntry]:
    if envelope is None:
        return []
    if isinstance(envelope, dict) and "variants" in envelope:  # Evaluation.envelope: an Envelope's model_dump()
        from harness.shipping.envelope import Envelope

        envelope = Envelope.model_validate(envelope)
    if hasattr(envelope, "variants") and hasattr(envelope, "sizes"):  # harness.shipping.envelope.Envelope
        return [dict(envelope.sizes)] + [dict(v.sizes) for v in envelope.variants if v.correct]
    if isinstance(envelope, dict):
        return [envelope]
    return list(envelope)


def _entry(problem: Problem, given: EnvelopeEntry, own: dict[str, Any]) -> dict[str, Any]:
    if isinstance(given, dict):
        constants = {c.name for c in size_constants(problem.source)}
        unknown = sorted(set(given) - constants)
        if unknown:
            raise ExportError(f"{problem.key}: envelope sizes {', '.join(unknown)} are not among its size constants "
                              f"({', '.join(sorted(constants)) or 'none'})")
        if any(type(v) is not int or v < 1 for v in given.values()):
            raise ExportError(f"{problem.key}: envelope sizes must be positive integers: {given}")
        return signatures(problem, rewrite_constants(problem.source, dict(given)), dict(given))
    shapes = [list(shape) for shape in given]
    if len(shapes) != len(own["inputs"]) or not all(all(type(d) is int and d >= 0 for d in s) for s in shapes):
        raise ExportError(f"{problem.key}: an envelope shape list needs one shape (of non-negative ints) per input "
                          f"({len(own['inputs'])}), got {given}")
    inputs = [[shape, dtype, True] for shape, (_, dtype, _) in zip(shapes, own["inputs"])]
    return {**own, "sizes": None, "inputs": inputs}


def _readme(problem: Problem, package: str, op_name: str, device: str, entries: list[dict[str, Any]], out: Path,
            candidate_name: str, own: dict[str, Any], buckets: Sequence[dict[str, Any]]) -> str:
    def described(entry: dict[str, Any]) -> str:
        shapes = ", ".join(f"{'x'.join(map(str, shape)) or 'scalar'} {dtype}" for shape, dtype, _ in entry["inputs"])
        sizes = " ".join(f"{k}={v}" for k, v in (entry["sizes"] or {}).items())
        return f"- inputs {shapes}" + (f" ({sizes})" if sizes else "")

    stateless = ("For this problem (no parameters or buffers) the op is also a plain function: "
                 f"`{package}.forward(*inputs)`.\n") if not own["state"] else ""
    bucket_lines = "\n".join(f"- {bucket_line(b)}" for b in buckets)
    return Template(templates.README).substitute(
        package=package, title=problem.name, candidate=candidate_name, problem=problem.label, op=op_name,
        entries=len(entries), plural="y" if len(entries) == 1 else "ies", device=device,
        envelope="\n".join(described(e) for e in entries), out_dir=out,
        buckets=(templates.README_BUCKETS.replace("LINES", bucket_lines) if buckets else ""),
        init_call=own["init"] if own["init"] is not None else f"*{package}.INIT_INPUTS", stateless_note=stateless)


def bucket_line(bucket: dict[str, Any]) -> str:
    """One bucket as the export's output and the package's README show it: its ranges and the sizes sampled."""
    samples = "; ".join(f"{' '.join(f'{k}={v}' for k, v in s['sizes'].items())} ({s['kind']})"
                        for s in bucket["samples"])
    state = "verified" if bucket["verified"] else f"NOT verified, not routed: {bucket['why_not']}"
    return f"bucket {bucket['bucket']} ({bucket['origin']}): {state}; sampled at {samples}"


@dataclass
class VerifiedExport:
    """`kernelwright export-op`: the candidate's verdict at its own sizes and around them, and, where accepted,
    the package written (with its buckets, each verified or not) and whether its own test passed (None: not run)."""

    evaluation: Any
    exported: ExportedOp | None = None
    test_passed: bool | None = None
    test_output: str = ""

    @property
    def holds(self) -> bool:
        """Exported, its test not failed, and every bucket the user declared verified."""
        declared_wrong = any(b["origin"] == "declared" for b in (self.exported.unverified_buckets
                                                                  if self.exported else []))
        return self.exported is not None and self.test_passed is not False and not declared_wrong


def verify_and_export(problem_spec: str, candidate: Path, out_dir: Path, device: str, shapes: list[str] | None,
                      db_url: str | None, run_test: bool = True, progress: Any = None,
                      buckets: list[str] | None = None, bucket_samples: int | None = None) -> VerifiedExport:
    """Judge the candidate exactly as `eval` does (correctness at the problem's sizes and its envelope; nothing
    stored, nothing timed), then, only for an accepted kernel, verify its shape buckets (those declared, else the
    hull of the sizes it was verified at; kernelwright/export_buckets.py), write the op package with the sizes
    judged correct and the verified buckets as its envelope, and run the package's own test in a fresh process."""
    from kernelwright.bucket_spec import parse_buckets
    from kernelwright.eval_service import eval_policy, judge, read_candidate, target_problem
    from kernelwright import export_buckets

    samples = export_buckets.DEFAULT_SAMPLES if bucket_samples is None else bucket_samples
    if samples < 0:
        raise ExportError(f"--bucket-samples {samples}: give 0 or more")
    specs = parse_buckets(buckets)
    plans = [export_buckets.plan_bucket(target_problem(problem_spec, False)[0], spec) for spec in specs]
    policy = eval_policy("default", skip_timing=True)
    outcome = judge(problem_spec, candidate, False, device, policy, db_url, store=False, progress=progress,
                    shapes=shapes)
    result = VerifiedExport(outcome.evaluation)
    if not outcome.evaluation.accepted:
        return result
    problem, source, resolved = outcome.problem, read_candidate(candidate), outcome.evaluation.device
    records = [export_buckets.verify_bucket(problem, source, resolved, policy, plan,
                                            export_buckets.draw_samples(plan.spec, samples), progress)
               for plan in plans]
    if not specs:
        records = export_buckets.inferred_buckets(problem, source, resolved, policy, outcome.evaluation.envelope,
                                                  samples, progress)
    result.exported = export_op(problem, source, out_dir, envelope=outcome.evaluation.envelope, device=resolved,
                                candidate_name=candidate.name, buckets=records)
    if run_test:
        if progress:
            progress("running the package's own test in a fresh process")
        result.test_passed, result.test_output = run_exported_test(result.exported.out_dir, result.exported.package)
    return result
