"""`kernelwright export`: JSONL datasets (sft, rl, preference, pairs) from the store, each with a dataset card
(OUTPUT.card.json) that says what it holds and which harness judged it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelwright.eval_service import UsageError
from rewards.datasets import BUILDERS, dataset_card, dedupe, rl_records
from rewards.reward import DEFAULT_REWARD, REWARDS
from store import open_store
from store.browse import get_run_row
from store.export_rows import candidate_rows


def card_path(output: Path) -> Path:
    return output.with_name(output.name + ".card.json")


def default_min_speedup(kind: str) -> float:
    """What `--min-speedup` is when not given: an sft, preference or pairs dataset holds up only kernels
    significantly faster than the reference (1.0); rl keeps every accepted kernel (its reward says how good)."""
    return 0.0 if kind == "rl" else 1.0


def export_dataset(kind: str, output: Path, db_url: str | None, run_ids: list[str] | None,
                   min_speedup: float | None, reward_definition: str = DEFAULT_REWARD) -> int:
    """Write the records and their card; returns how many records were written."""
    if kind not in BUILDERS:
        raise UsageError(f"--format {kind!r}: choose one of {', '.join(BUILDERS)}")
    if reward_definition not in REWARDS:
        raise UsageError(f"--reward {reward_definition!r}: choose one of {', '.join(REWARDS)}")
    sessions = open_store(db_url, create=False)
    missing = [run_id for run_id in run_ids or [] if get_run_row(sessions, run_id) is None]
    if missing:
        raise UsageError(f"no run {', '.join(map(repr, missing))} in this store (see `kernelwright runs list`)")
    if min_speedup is None:
        min_speedup = default_min_speedup(kind)
    stored = candidate_rows(sessions, run_ids)
    rows = dedupe(stored)
    if kind == "rl":
        records = rl_records(rows, min_speedup, reward_definition)
    else:
        records = BUILDERS[kind](rows, min_speedup)
    card = dataset_card(kind, rows, records, len(stored) - len(rows), reward_definition if kind == "rl" else None,
                        min_speedup)
    _write_lines(output, records)
    _write_lines(card_path(output), [card], indent=2)
    return len(records)


def _write_lines(output: Path, records: list[dict[str, Any]], indent: int | None = None) -> None:
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        temporary = output.with_suffix(output.suffix + ".tmp")
        with open(temporary, "w") as handle:
            for record in records:
                handle.write(json.dumps(record, indent=indent) + "\n")
        temporary.replace(output)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc}") from None
