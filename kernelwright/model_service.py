"""`kernelwright optimize-model`: a user's model file in, its hot regions profiled and extracted as problems
(`--plan` stops there), each optimized by the agent, the accepted ones composed back as guarded modules into
`patched.py`, and the whole model judged by the harness at every input set. The work is in regions/."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from harness.device import resolve_device
from harness.paths import home
from kernelwright.eval_service import UsageError
from regions.model_file import ModelFileError
from regions.plan import Plan, plan_model

Progress = Callable[[str], None]


def model_folder(path: Path, out: Path | None) -> Path:
    """Where a model's plan, regions and patch go: OUT, else <home>/models/<stem>-<hash of the file>."""
    if out is not None:
        return out
    if not path.is_file():
        raise UsageError(f"{path}: no such model file")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:8]
    return home() / "models" / f"{path.stem}-{digest}"


def make_plan(path: Path, device: str, out: Path | None, min_share: float, max_regions: int,
              progress: Progress | None = None, only: list[str] | None = None) -> Plan:
    resolved = resolve_device(device)
    if resolved not in ("cpu", "cuda"):
        raise UsageError(f"optimize-model profiles and runs kernels on cpu or cuda, not {resolved}")
    try:
        return plan_model(path, resolved, model_folder(path, out), min_share, max_regions, progress, only)
    except ModelFileError as exc:
        raise UsageError(str(exc)) from None


def plan_summary(plan: Plan) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(plan)


LEDGER = "optimize.json"  # per region: its run, status and best kernel; a rerun skips the finished ones


def _ledger(folder: Path) -> dict[str, Any]:
    import json

    path = folder / LEDGER
    return json.loads(path.read_text()) if path.is_file() else {}


def _save_ledger(folder: Path, ledger: dict[str, Any]) -> None:
    import json

    (folder / LEDGER).write_text(json.dumps(ledger, indent=2) + "\n")


def _reuse_plan(path: Path, folder: Path, device: str) -> Plan | None:
    """The plan already in `folder` for this same file and device (a rerun resumes on it, regions and all)."""
    if not (folder / "plan.json").is_file():
        return None
    from kernelbench.problem import fingerprint_source

    plan = Plan.read(folder)
    same = Path(plan.model).resolve() == path.resolve() and plan.device == resolve_device(device) and \
        plan.source_hash == fingerprint_source(path.read_text())
    return plan if same and all(Path(r["problem"]).is_file() for r in plan.regions) else None


def _budgets(plan: Plan, config: Any) -> dict[str, Any]:
    from regions.budget import headroom, split_budget

    rows = [(r["slug"], r["share"], headroom(plan.region_problem(r["slug"]), plan.device, r["ms"]))
            for r in plan.regions]
    return {b.slug: b for b in split_budget(rows, config.budget_usd, config.max_tokens, config.time_limit_s)}


def _search_region(plan: Plan, region: dict[str, Any], config: Any, models: Any, db: str | None,
                   ledger: dict[str, Any], executor: Any, progress: Progress | None) -> None:
    """One region through `optimize`'s own entry (the agent, the executor, the store, the op export)."""
    from kernelwright.interrupts import Interrupted, RunInterrupted
    from kernelwright.optimize_service import run_optimize

    slug = region["slug"]
    known = ledger.get(slug, {})
    resume = known.get("run_id") if known.get("status") == "interrupted" else None
    try:
        summary = run_optimize(None if resume else region["problem"], config, models, db, resume=resume,
                               progress=progress, executor=executor)
    except RunInterrupted as stop:
        ledger[slug] = {"run_id": stop.run_id, "status": "interrupted"}
        _save_ledger(Path(plan.folder), ledger)
        raise Interrupted(f"interrupted: region {slug} (run {stop.run_id}) is marked `interrupted`; continue the "
                          f"model where it stopped with\n  kernelwright optimize-model {plan.model} --out "
                          f"{plan.folder} (and the same model options)") from None
    best = summary.get("best") or {}
    ledger[slug] = {"run_id": summary["run_id"], "status": summary["status"], "best": best.get("path"),
                    "speedup": best.get("speedup"), "speedup_ci": best.get("speedup_ci"),
                    "envelope": summary.get("envelope"), "op": summary.get("op")}
    _save_ledger(Path(plan.folder), ledger)


def search_regions(plan: Plan, config: Any, models: Any, db: str | None, progress: Progress | None = None,
                   executor: Any = None) -> dict[str, Any]:
    """Every region of the plan searched (hottest by budget weight first), each with its share of the budget;
    finished regions of an earlier run are skipped. Returns the ledger."""
    from harness.execution.eval_task import ExecutorUnavailable
    from harness.execution.executor import open_executor

    folder = Path(plan.folder)
    ledger = _ledger(folder)
    budgets = _budgets(plan, config)
    owned = executor is None
    if owned:
        try:
            executor = open_executor(config.executor, plan.device, config.workers, config.ray_address)
        except ExecutorUnavailable as exc:
            raise UsageError(str(exc)) from None
    try:
        for region in sorted(plan.regions, key=lambda r: -budgets[r["slug"]].weight):
            slug, budget = region["slug"], budgets[region["slug"]]
            if ledger.get(slug, {}).get("status") not in (None, "interrupted"):
                if progress:
                    progress(f"region {slug}: searched already (run {ledger[slug]['run_id']})")
                continue
            if progress:
                progress(f"region {slug}: {region['share']:.1%} of the model's time, headroom to the floor "
                         f"{budget.headroom:.0%}, {budget.weight:.0%} of the budget")
            update = {"device": plan.device, "budget_usd": budget.budget_usd, "max_tokens": budget.max_tokens,
                      "time_limit_s": budget.time_limit_s}
            _search_region(plan, region, config.model_copy(update=update), models, db, ledger, executor, progress)
    finally:
        if owned:
            executor.shutdown()
    return ledger


def accepted_regions(plan: Plan, ledger: dict[str, Any], policy: Any, progress: Progress | None = None) -> list[Any]:
    """Each region's best kernel, checked again at the other shapes the model serves it (correctness only), and
    exported as export-op's guarded op: the op package's envelope is the guard patched.py uses."""
    from harness.shipping.envelope import Envelope, check_envelope, variants
    from kernelwright.export_op import ExportError, export_op
    from regions.compose import Accepted

    found = []
    for region in plan.regions:
        entry = ledger.get(region["slug"], {})
        if not entry.get("best") or not entry.get("speedup"):
            continue
        problem = plan.region_problem(region["slug"])
        source = Path(entry["best"]).read_text()
        sizes: list[dict[str, int]] = []
        if entry.get("envelope"):
            known = Envelope.model_validate(entry["envelope"])
            sizes += [dict(known.sizes)] + [dict(v.sizes) for v in known.variants if v.correct]
        if region["served_sizes"]:
            if progress:
                progress(f"region {region['slug']}: checking its kernel at the other shapes the model serves")
            served = check_envelope(problem, source, plan.device, policy, variants(problem, region["served_sizes"]),
                                    timed=0, progress=progress)
            sizes += [dict(v.sizes) for v in served.variants if v.correct]
        try:
            exported = export_op(problem, source, Path(plan.folder) / "ops" / region["slug"],
                                 envelope=sizes or None, device=plan.device)
        except ExportError as exc:
            if progress:
                progress(f"region {region['slug']}: not composed ({exc})")
            continue
        found.append(Accepted(region["slug"], region["paths"], source, exported.envelope, plan.device,
                              entry["speedup"], f"run {entry['run_id']}, {entry['best']}; op "
                              f"{exported.out_dir / exported.package}"))
    return found


def _compile_baselines(model_file: Any, device: str, policy: Any, progress: Progress | None) -> dict[int, Any]:
    """torch.compile of the original at each input set (harness/execution/baseline.py), where it can be timed."""
    from harness.execution.baseline import measure_baselines

    found = {}
    for entry in model_file.sets:
        if progress:
            progress(f"timing torch.compile of the original at input set {entry.index + 1}")
        found[entry.index] = measure_baselines(model_file.set_problem(entry.index), device, policy)
    return found


def verify_model(plan: Plan, accepted: list[Any], policy: Any, compile_baseline: bool,
                 progress: Progress | None = None) -> dict[str, Any]:
    """Each region alone end to end (kept only where its gain survives), then the kept ones together: patched.py
    is the kept composition. Returns the result record (also written as result.json and report.md)."""
    from dataclasses import asdict

    from regions.model_file import load_model_file
    from regions.verify import attribute, judge_patch, predicted

    folder = Path(plan.folder)
    model_file = load_model_file(plan.model)
    policy = policy.model_copy(update={"envelope": False})  # the served sets are the shapes that matter here
    weights = {s.index: s.weight for s in model_file.sets}
    regions = {r["slug"]: r for r in plan.regions}
    attributions = []
    for region in accepted:
        info = regions[region.slug]
        _, alone = judge_patch(model_file, [region], plan.device, policy, progress)
        served = {int(k): v for k, v in info["served"].items()}
        attributions.append(attribute(region, info["share"], served, info["dtype"], weights, alone, info["ms"]))
        if progress:
            progress(f"region {region.slug}: {attributions[-1].notes[-1]}")
    kept = [a for a, record in zip(accepted, attributions) if record.kept]
    final, source, together = None, None, None
    if len(kept) > 1:
        source, together = judge_patch(model_file, kept, plan.device, policy, progress)
        if not together.accepted or not together.significant or not together.speedup or together.speedup <= 1.0:
            best = max((r for r in attributions if r.kept), key=lambda r: r.measured.speedup or 0.0)
            if progress:
                progress(f"the kept regions together do not hold end to end; keeping {best.slug} alone")
            kept, source = [a for a in kept if a.slug == best.slug], None
            for record in attributions:
                if record.kept and record.slug != best.slug:
                    record.kept = False
                    verdict = next((x.verdict for x in together.sets if x.verdict != "accepted"), "not faster")
                    record.notes.append(f"dropped: the kept regions together were {verdict} end to end; "
                                        f"{best.slug} alone measured the fastest and is kept")
        else:
            final = together
    if len(kept) == 1:
        final = next(r.measured for r in attributions if r.kept and r.slug == kept[0].slug)
    if kept:
        from regions.compose import compose

        source = source or compose(model_file.source, model_file.path, kept)
        (folder / "patched.py").write_text(source)
    result: dict[str, Any] = {
        "model": plan.model, "device": plan.device, "folder": plan.folder, "model_ms": plan.model_ms,
        "regions": [asdict(a) for a in attributions],
        "kept": [a.slug for a in kept],
        "predicted": predicted([(regions[a.slug]["share"], a.speedup) for a in kept if a.speedup]) if kept else 1.0,
        "end_to_end": asdict(final) if final else None,
        "together": asdict(together) if together and final is not together else None,
        "patched": str(folder / "patched.py") if kept else None,
        "eval_command": f"kernelwright eval {plan.model} {folder / 'patched.py'} --device {plan.device} "
                        "--whole-model --no-envelope"
        if kept else None}
    if compile_baseline and kept and final and final.accepted:
        result["compile"] = _against_compile(_compile_baselines(model_file, plan.device, policy, progress), final)
    _write_result(folder, result, plan)
    return result


def _against_compile(baselines: dict[int, Any], final: Any) -> dict[str, Any]:
    """The patched model against torch.compile of the original, set by set (eager/compiled over eager/patched)."""
    rows = []
    for entry in final.sets:
        base = baselines.get(entry.index, {})
        ratio = None
        if base.get("compile_speedup") and entry.speedup:
            ratio = entry.speedup / base["compile_speedup"]
        rows.append({"set": entry.index + 1, "compile_speedup": base.get("compile_speedup"),
                     "patched_over_compile": ratio, "error": base.get("compile_error") or base.get("error")})
    return {"sets": rows}


def _write_result(folder: Path, result: dict[str, Any], plan: Plan) -> None:
    import json

    from reports.model_report import write_model_report

    (folder / "result.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    result["report"] = str(write_model_report(folder, result, plan.regions))


def optimize_model(path: Path, config: Any, models: Any, db: str | None, out: Path | None, min_share: float,
                   max_regions: int, compile_baseline: bool, progress: Progress | None = None,
                   executor: Any = None, only: list[str] | None = None) -> dict[str, Any]:
    """The whole command: plan (or the folder's plan, on a rerun), search each region, compose, verify."""
    folder = model_folder(path, out)
    plan = _reuse_plan(path, folder, config.device)
    if plan is None:
        if (folder / LEDGER).is_file():  # searches of another plan (another file, device or selection)
            (folder / LEDGER).replace(folder / f"{LEDGER}.replaced")
        plan = make_plan(path, config.device, out, min_share, max_regions, progress, only)
    elif progress:
        progress(f"resuming in {folder} (its plan: {len(plan.regions)} regions)")
    if not plan.regions:
        return {"model": plan.model, "folder": plan.folder, "regions": [], "kept": [], "end_to_end": None,
                "message": "no region to search: see plan.md for what was not extracted and why"}
    config = config.model_copy(update={"device": plan.device})
    ledger = search_regions(plan, config, models, db, progress, executor)
    accepted = accepted_regions(plan, ledger, config.policy, progress)
    if not accepted:
        return {"model": plan.model, "folder": plan.folder, "regions": [], "kept": [], "end_to_end": None,
                "message": "no region has an accepted kernel; see each region's run (optimize.json)"}
    return {**verify_model(plan, accepted, config.policy, compile_baseline, progress), "searches": ledger}
