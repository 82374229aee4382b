"""`kernelwright export`: JSONL datasets (sft, rl, preference) from the store."""

from __future__ import annotations

import json
from pathlib import Path

from kernelwright.eval_service import UsageError
from rewards.datasets import BUILDERS
from store import open_store
from store.browse import get_run_row
from store.export_rows import candidate_rows


def export_dataset(kind: str, output: Path, db_url: str | None, run_ids: list[str] | None,
                   min_speedup: float) -> int:
    if kind not in BUILDERS:
        raise UsageError(f"--format {kind!r}: choose one of {', '.join(BUILDERS)}")
    sessions = open_store(db_url, create=False)
    missing = [run_id for run_id in run_ids or [] if get_run_row(sessions, run_id) is None]
    if missing:
        raise UsageError(f"no run {', '.join(map(repr, missing))} in this store (see `kernelwright runs list`)")
    records = BUILDERS[kind](candidate_rows(sessions, run_ids), min_speedup)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        temporary = output.with_suffix(output.suffix + ".tmp")
        with open(temporary, "w") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")
        temporary.replace(output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc}") from None
    return len(records)
