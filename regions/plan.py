"""The plan `optimize-model --plan` stops at: the profile, the regions written as problems (with the trained values
of their parameters in a state file beside each), and what was not extracted and why. Written to the model's
folder as plan.json, plan.md and regions/<model>_<slug>.py with regions/<model>_<slug>.state.pt."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kernelbench.problem import Problem, fingerprint_source, problem_from_source
from regions.extract import Extraction, Region, Skipped, region_state
from regions.model_file import ModelFile
from regions.profile import Profile

TOP_MODULES = 12
TOP_OPERATORS = 10


@dataclass
class Plan:
    model: str  # the model file
    device: str
    folder: str
    model_ms: float
    per_set: list[dict[str, Any]]  # index, weight, shapes, ms
    modules: list[dict[str, Any]]  # the heaviest leaf modules: path, type, ms, share
    operators: list[dict[str, Any]]  # the heaviest operators: name, ms, share
    regions: list[dict[str, Any]]  # Region fields + problem path + state path
    unhandled: list[dict[str, Any]]
    cold: list[dict[str, Any]]
    source_hash: str = ""  # the model file's content when planned: a changed file is planned again

    def region_problem(self, slug: str) -> Problem:
        entry = next(r for r in self.regions if r["slug"] == slug)
        path = Path(entry["problem"])
        return problem_from_source(path.read_text(), path.stem, path=str(path))

    @classmethod
    def read(cls, folder: Path) -> "Plan":
        return cls(**json.loads((folder / "plan.json").read_text()))


def build_plan(model_file: ModelFile, profile: Profile, extraction: Extraction, folder: Path) -> Plan:
    """Write every region's problem and state file into `folder`, and the plan beside them."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    regions = []
    for region in extraction.regions:
        where = folder / "regions"
        where.mkdir(parents=True, exist_ok=True)
        stem = f"{Path(model_file.path).stem}_{region.slug}"
        (where / f"{stem}.py").write_text(region.source)
        torch.save(region_state(profile, region), where / f"{stem}.state.pt")
        regions.append({**_region_record(region), "problem": str(where / f"{stem}.py"),
                        "state": str(where / f"{stem}.state.pt")})
    leaves = sorted((m for m in profile.modules.values() if m.leaf), key=lambda m: -m.ms)[:TOP_MODULES]
    plan = Plan(
        model=model_file.path, device=profile.device, folder=str(folder), model_ms=profile.model_ms,
        per_set=[{"index": s.index, "weight": s.weight, "shapes": [shape for shape, _ in s.signature],
                  "ms": profile.per_set_ms[s.index]} for s in model_file.sets],
        modules=[{"path": m.path, "type": m.type_name, "ms": m.ms, "share": profile.share(m.ms)} for m in leaves],
        operators=[{"name": n, "ms": ms, "share": profile.share(ms)} for n, ms in profile.operators[:TOP_OPERATORS]],
        regions=regions, unhandled=[asdict(s) for s in extraction.unhandled],
        cold=[asdict(s) for s in extraction.cold], source_hash=fingerprint_source(model_file.source))
    (folder / "plan.json").write_text(json.dumps(asdict(plan), indent=2) + "\n")
    (folder / "plan.md").write_text(plan_markdown(plan))
    return plan


def _region_record(region: Region) -> dict[str, Any]:
    record = asdict(region)
    record.pop("source")
    record["served"] = {str(k): v for k, v in region.served.items()}
    return record


def plan_markdown(plan: Plan) -> str:
    lines = [f"# Plan for {plan.model} on {plan.device}", "",
             f"Model time {plan.model_ms:.3f} ms per forward, weighted over {len(plan.per_set)} input set(s):", ""]
    for s in plan.per_set:
        lines.append(f"- set {s['index'] + 1}: weight {s['weight']:.2f}, inputs {s['shapes']}, {s['ms']:.3f} ms")
    lines += ["", "## Regions extracted", "", "| region | modules | share | ms | problem |", "|---|---|---|---|---|"]
    for r in plan.regions:
        lines.append(f"| {r['slug']} | {' -> '.join(r['paths'])} | {r['share']:.1%} | {r['ms']:.3f} | "
                     f"{r['problem']} |")
    lines += ["", "## Not extracted", ""]
    for s in plan.unhandled + plan.cold:
        lines.append(f"- {s['path']} ({s['share']:.1%}): {s['reason']}")
    lines += ["", "## Heaviest operators", ""]
    for op in plan.operators:
        lines.append(f"- {op['name']}: {op['ms']:.3f} ms ({op['share']:.1%})")
    return "\n".join(lines) + "\n"


def plan_model(path: str | Path, device: str, folder: Path, min_share: float = 0.02, max_regions: int = 4,
               progress: Any = None, only: list[str] | None = None) -> Plan:
    """Load the model file, profile it at every input set, extract and check the regions, write the plan."""
    from regions.extract import extract
    from regions.model_file import load_model_file
    from regions.profile import profile_model

    say = progress or (lambda _m: None)
    model_file = load_model_file(path)
    say(f"profiling {model_file.path} on {device} at {len(model_file.sets)} input set(s)")
    profile = profile_model(model_file, device)
    say(f"model {profile.model_ms:.3f} ms per forward (weighted); extracting regions")
    extraction = extract(profile, model_file, min_share, max_regions, only)
    for region in extraction.regions:
        say(f"region {region.slug}: {region.share:.1%} of the model's time; {region.fidelity}")
    return build_plan(model_file, profile, extraction, folder)
