"""The command line's options, each declared once (typer `Annotated` types), and the groups of options that two
commands take together (the models, the execution). Light on purpose: `kernelwright --help` reads this file and
imports nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from harness.device import DEVICES


def _device(value: str) -> str:
    if value not in DEVICES:
        raise typer.BadParameter(f"choose one of {', '.join(DEVICES)}")
    return value


def flag(*decls: str, **options: Any) -> Any:
    """A boolean option without a `<bool>` type column in --help."""
    return typer.Option(*decls, metavar="", **options)


DB_HELP = ("SQLAlchemy URL of the results store (default: $KERNELWRIGHT_DB, else kernelwright.db in "
           "$KERNELWRIGHT_HOME, else in the per-user data folder: ~/.local/share/kernelwright on Linux).")

Db = Annotated[Optional[str], typer.Option("--db", help=DB_HELP)]
JsonObject = Annotated[bool, flag("--json", help="Print one JSON object on stdout.")]
JsonRows = Annotated[bool, flag("--json", help="Print JSON on stdout.")]
DeviceChoice = Annotated[str, typer.Option(callback=_device, metavar="|".join(DEVICES),
                                           help="cpu, cuda, cuda-compile-only or auto (cuda when a GPU is visible).")]
Levels = Annotated[Optional[str], typer.Option(help="Comma-separated levels, e.g. 1,2.")]
PolicyLevel = Annotated[str, typer.Option("--policy", help="Static policy: strict or default.")]
Timeout = Annotated[float, typer.Option(min=1.0, help="Run clock of the candidate's process (import, checks, "
                                                      "timing); building is on --build-timeout.")]
BuildTimeout = Annotated[float, typer.Option("--build-timeout", min=1.0, help="Seconds per extension build.")]
Workers = Annotated[Optional[int], typer.Option(min=1, help="Compile workers, and in a sweep the problems optimized "
                                                            "at once (default: cores and memory allow); kernels "
                                                            "are still timed one at a time.")]
Rounds = Annotated[int, typer.Option(min=1, help="Rounds, the seed round included (per problem in a sweep).")]
Patience = Annotated[int, typer.Option(min=1, help="Stop after this many rounds without improvement (per problem "
                                                   "in a sweep).")]
MaxTokens = Annotated[Optional[int], typer.Option(min=1, help="Token budget for the whole run (a sweep: for all its "
                                                              "problems; none starts once it is spent).")]
BudgetUsd = Annotated[Optional[float], typer.Option(min=0.0, help="Dollar budget for the whole run (a sweep: for all "
                                                                  "its problems; none starts once it is spent).")]
Resume = Annotated[Optional[str], typer.Option(help="Continue this run where it stopped (a sweep skips its "
                                                    "finished problems).")]
Problem = Annotated[str, typer.Argument(metavar="PROBLEM", help="Problem file (KernelBench format) or bundled "
                                                                "problem name.")]
ProblemPath = Annotated[Path, typer.Argument(metavar="PATH", help="Problem file or folder (a KernelBench checkout "
                                                                  "works).")]
TimingBudget = Annotated[Optional[float], typer.Option(
    "--timing-budget", min=0.05, metavar="SECONDS", help="Seconds spent timing each model per process set (default "
    "1.0): more gives tighter intervals and more checked timed calls.")]
RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="A run id (see runs list).")]


@dataclass
class ModelOptions:
    """How to reach the coder and judge models (optimize and sweep)."""

    model: Annotated[Optional[str], typer.Option(help="Model name (default gpt-4o), or scripted:FILE for replies "
                                                      "from a file.")] = None
    judge_model: Annotated[Optional[str], typer.Option(help="A different model for the judge (default: "
                                                            "--model).")] = None
    base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible endpoint, e.g. "
                                                         "http://localhost:8000/v1.")] = None
    api_key_env: Annotated[Optional[str], typer.Option(help="Name of the environment variable holding the key "
                                                            "(default OPENAI_API_KEY).")] = None
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature.")] = None
    reasoning_effort: Annotated[Optional[str], typer.Option(help="low, medium or high (reasoning models).")] = None
    llm_timeout: Annotated[Optional[float], typer.Option(min=1.0, help="Seconds one LLM call may take (default "
                                                                       "600); a slow local model needs more.")] = None
    reply_tokens: Annotated[Optional[int], typer.Option(min=1, help="Cap on one reply's tokens (a reply cut off at "
                                                                    "it is asked once for the file alone).")] = None


@dataclass
class ExecutionOptions:
    """Where and how candidates are evaluated (optimize and sweep)."""

    device: DeviceChoice = "auto"
    workers: Workers = None
    executor: Annotated[str, typer.Option(help="local, or ray (a local 127.0.0.1 cluster, or "
                                               "--ray-address).")] = "local"
    ray_address: Annotated[Optional[str], typer.Option(help="Address of an existing Ray cluster.")] = None
