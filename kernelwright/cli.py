"""The typer CLI. It parses, calls a service function, and renders; it decides nothing."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

import typer
from rich.console import Console
from rich.markup import escape

from harness.device import DEVICES
from kernelwright import __version__

if TYPE_CHECKING:
    from harness import EvalPolicy
    from agent.run_spec import ModelSpec
    from kernelwright.interrupts import RunInterrupted

# Each command imports its service when it runs: `kernelwright --help` loads typer and rich, not torch, the
# harness's stages or SQLAlchemy.

HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(no_args_is_help=True, add_completion=False, context_settings=HELP,
                  help="LLM-written kernels, verified by a harness that treats every candidate as hostile.")


def _flag(default: bool, *decls: str, **options: Any) -> Any:
    """A boolean option without a `<bool>` type column in --help."""
    return typer.Option(default, *decls, metavar="", **options)


DEVICE_CHOICES = "|".join(DEVICES)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernelwright {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = _flag(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """LLM-written kernels, verified by a harness that treats every candidate as hostile."""
    from kernelwright.settings import settle_home

    settle_home()


problems_app = typer.Typer(no_args_is_help=True, context_settings=HELP, help="List and inspect KernelBench-format problems.")
app.add_typer(problems_app, name="problems")
runs_app = typer.Typer(no_args_is_help=True, context_settings=HELP, help="Browse the results store: runs, best kernels, comparisons.")
app.add_typer(runs_app, name="runs")
stderr = Console(stderr=True, soft_wrap=True)  # long lines stay whole in log files

DB_HELP = ("SQLAlchemy URL of the results store (default: $KERNELWRIGHT_DB, else kernelwright.db in "
           "$KERNELWRIGHT_HOME, else in the nearest runs/ folder holding one, from the current folder up).")
EXIT_NOT_ACCEPTED = 1
EXIT_USAGE = 2


def _user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean a user's mistake (a message and exit status 2, never a traceback)."""
    from agent.recorder import ResumeError
    from harness.device import DeviceError
    from kernelbench.problem import ProblemError
    from kernelwright.eval_service import UsageError
    from store.db import StoreError

    return UsageError, ProblemError, DeviceError, StoreError, ResumeError


def _fail(message: str) -> typer.Exit:
    stderr.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(EXIT_USAGE)


def _policy(level: str, **fields: object) -> EvalPolicy:
    from harness import EvalPolicy

    if level not in ("strict", "default"):
        raise _fail(f"--policy {level!r}: choose strict or default")
    return EvalPolicy(static_policy=level, **fields)


def _levels(level: str | None) -> set[int] | None:
    try:
        return {int(x) for x in level.split(",")} if level else None
    except ValueError:
        raise _fail(f"--level {level!r}: expected numbers such as 1,2") from None


def _emit(rows: object, json_output: bool, table: Callable[[Any], Any]) -> None:
    from kernelwright import render

    if json_output:
        typer.echo(json.dumps(rows))
    else:
        render.print_table(table(rows))


def _guarded(call: Callable[..., Any], *args: Any) -> Any:
    """Run a service call; a user's mistake becomes a message and exit status 2, never a traceback."""
    try:
        return call(*args)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None


@contextmanager
def _progress(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner in a terminal; elsewhere (CI logs, files) one timestamped line per step."""
    if stderr.is_terminal:
        with stderr.status(first) as status:
            yield lambda message: status.update(message)
        return
    started = time.monotonic()
    yield lambda message: stderr.print(f"[{time.monotonic() - started:6.1f} s] {message}", markup=False)


def _lines() -> Callable[[str], None]:
    """Progress of long commands, one line per step (kept whole in log files)."""
    return lambda message: stderr.print(message, markup=False)


def _device_option(value: str) -> str:
    if value not in DEVICES:
        raise typer.BadParameter(f"choose one of {', '.join(DEVICES)}")
    return value


@app.command("eval")
def eval_command(
    problem: str = typer.Argument(..., metavar="PROBLEM", help="Problem file (KernelBench format) or bundled problem name."),
    candidate: Optional[Path] = typer.Argument(None, metavar="[CANDIDATE]",
                                               help="Candidate file defining ModelNew (not with --self-check)."),
    device: str = typer.Option("auto", callback=_device_option, metavar=DEVICE_CHOICES, help="cpu, cuda, cuda-compile-only or auto."),
    json_output: bool = _flag(False, "--json", help="Print one JSON object on stdout."),
    self_check: bool = _flag(False, "--self-check", help="Time the problem's own Model against itself (A/A): "
                                                         "what this machine can resolve now (nothing is stored)."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    trials: int = typer.Option(5, min=1, help="Correctness trials with fresh seeds (5 covers every input "
                                                "distribution, large magnitudes included)."),
    timeout: float = typer.Option(300.0, min=1.0, help="Run clock of the candidate's process (import, checks, "
                                                        "timing); building is on --build-timeout."),
    build_timeout: float = typer.Option(900.0, "--build-timeout", min=1.0, help="Seconds per extension build."),
    threads: int = typer.Option(1, min=1, help="CPU threads for reference and candidate (CPU device)."),
    shrink: bool = _flag(False, help="Rescale the problem's sizes to the CPU budget first."),
    policy_level: str = typer.Option("default", "--policy", help="Static policy: strict or default."),
    no_store: bool = _flag(False, "--no-store", help="Do not record the result."),
    profile: bool = _flag(False, "--profile", help="Store Nsight Compute metrics of an accepted CUDA kernel."),
) -> None:
    """Judge one candidate exactly as the agent's harness would. Exit 0 accepted, 1 not accepted, 2 usage."""
    from kernelwright import render
    from kernelwright.eval_service import run_eval, run_self_check, self_check_verdict

    policy = _policy(policy_level, trials=trials, timeout_s=timeout, cpu_threads=threads,
                     build_timeout_s=build_timeout)
    if self_check == (candidate is not None):
        raise _fail("give a CANDIDATE file to judge, or --self-check to time the problem against itself (not both)")
    try:
        with _progress("evaluating") as say:
            outcome = run_self_check(problem, device, policy, shrink=shrink, progress=say) if self_check else \
                run_eval(problem, candidate, device, policy, db, shrink=shrink, store=not no_store, progress=say,
                         profile=profile)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    if outcome.shrink and outcome.shrink.changes:
        stderr.print(f"size reduction: {outcome.problem.shrunk}", markup=False)
    if json_output:
        data = outcome.evaluation.summary()
        data["evaluation_id"] = outcome.evaluation_id
        data["problem"] = outcome.problem.key
        data["shrunk"] = outcome.problem.shrunk
        if self_check:
            data["self_check"] = self_check_verdict(outcome.evaluation)
        typer.echo(json.dumps(data))
    else:
        render.print_table(render.evaluation_table(outcome.problem, outcome.evaluation))
        if self_check:
            typer.echo(self_check_verdict(outcome.evaluation))
    if not outcome.evaluation.accepted or (self_check and outcome.evaluation.speedup_significant):
        raise typer.Exit(EXIT_NOT_ACCEPTED)


@problems_app.command("list")
def problems_list(
    path: Optional[Path] = typer.Argument(None, metavar="PATH", help="Problem file or folder (default: the bundled set)."),
    level: Optional[str] = typer.Option(None, help="Comma-separated levels, e.g. 1,2."),
    json_output: bool = _flag(False, "--json", help="Print JSON on stdout."),
) -> None:
    """List problems with their level, id and content fingerprint."""
    from kernelbench.bundled import PROBLEMS_ROOT
    from kernelbench.problem import load_problems
    from kernelwright import render

    try:
        problems = load_problems(path or PROBLEMS_ROOT, _levels(level))
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    if json_output:
        typer.echo(json.dumps([{"key": p.key, "name": p.name, "level": p.level, "id": p.problem_id,
                                "path": p.path, "fingerprint": p.fingerprint} for p in problems]))
    else:
        render.print_table(render.problems_table(problems))


@problems_app.command("shrink")
def problems_shrink(
    path: Path = typer.Argument(..., metavar="PATH", help="Problem file or folder."),
    level: Optional[str] = typer.Option(None, help="Comma-separated levels, e.g. 1,2."),
    write: Optional[Path] = typer.Option(None, "--write", metavar="DIR",
                                         help="Write every problem that shrinks or fits to DIR "
                                              "(levelN/<id>_<Name>.py), marked as shrunk, for eval, optimize, "
                                              "sweep and gate."),
    json_output: bool = _flag(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Show how each problem would be rescaled to the CPU budget, and which cannot be (--write keeps the files)."""
    from kernelbench.problem import load_problems
    from kernelwright.problem_service import shrink_report
    from kernelwright import render

    try:
        rows = shrink_report(load_problems(path, _levels(level)), progress=_lines(), write_to=write)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    _emit(rows, json_output, render.shrink_table)
    if write:
        stderr.print(f"wrote {sum('written' in r for r in rows)} problem(s) to {write}", markup=False)


@problems_app.command("check")
def problems_check(
    path: Path = typer.Argument(..., metavar="PATH", help="Problem file or folder (a KernelBench checkout works)."),
    level: Optional[str] = typer.Option(None, help="Comma-separated levels, e.g. 1,2."),
    device: str = typer.Option("cpu", callback=_device_option, metavar=DEVICE_CHOICES, help="Where to run the references."),
    shrink: bool = _flag(True, help="Rescale sizes to the CPU budget first (needed for KernelBench on CPU)."),
    output: Optional[Path] = typer.Option(None, help="Append each problem's row to this JSONL file as soon as it "
                                                     "is checked (a killed check keeps every finished problem)."),
    json_output: bool = _flag(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Run the canaries (zeros, ones, input passthrough, constant mean): which trivial outputs pass a problem."""
    from kernelbench.problem import load_problems
    from kernelwright.problem_service import check_problems
    from kernelwright import render

    finished: list[dict[str, Any]] = []

    def keep(row: dict[str, Any]) -> None:
        finished.append(row)
        if output:
            with open(output, "a") as sink:
                sink.write(json.dumps(row) + "\n")

    try:
        check_problems(load_problems(path, _levels(level)), device, shrink, progress=_lines(), on_row=keep)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    except OSError as exc:
        raise _fail(f"cannot write {output}: {exc.strerror or exc}") from None
    except KeyboardInterrupt:
        _emit(finished, json_output, render.check_table)
        stderr.print(f"interrupted after {len(finished)} problem(s); the rows above are the finished ones", markup=False)
        raise typer.Exit(130) from None
    _emit(finished, json_output, render.check_table)


@app.command("gate")
def gate_command(
    solutions: Optional[Path] = typer.Option(None, help="Verify a folder of KernelBench-format solutions instead "
                                                        "of the store."),
    problems_dir: Optional[Path] = typer.Option(None, "--problems-dir", "--problems",
                                                help="Problem folder for --solutions (default: the bundled set)."),
    shrink: bool = _flag(False, help="Rescale each problem of --solutions to the CPU budget first."),
    run: Optional[str] = typer.Option(None, help="Only kernels of this run."),
    problem: Optional[str] = typer.Option(None, help="Only problems whose key contains this text."),
    device: str = typer.Option("auto", callback=_device_option, metavar=DEVICE_CHOICES, help="cpu, cuda, cuda-compile-only or auto."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    policy_level: str = typer.Option("default", "--policy", help="Static policy: strict or default."),
    workers: Optional[int] = typer.Option(None, min=1, help="Compile workers (default: cores and memory allow); "
                                                            "kernels are still timed one at a time."),
    no_store: bool = _flag(False, "--no-store", help="Do not record the re-measurements of --solutions (those "
                                                     "of stored kernels are always kept with them)."),
    json_output: bool = _flag(False, "--json", help="Print JSON on stdout."),
) -> None:
    """CI correctness gate: re-verify accepted kernels with new secret seeds. Exit 1 if any no longer holds."""
    from kernelwright import render
    from kernelwright.gate_service import GateInterrupted, gate_folder, gate_store

    policy = _policy(policy_level)
    try:
        with _progress("verifying") as say:
            if solutions:
                results = gate_folder(solutions, problems_dir, device, policy, progress=say, shrink=shrink,
                                      workers=workers, problem_filter=problem, db_url=db, store=not no_store,
                                      run_id=run)
            else:
                results = gate_store(db, device, policy, run, problem, progress=say, workers=workers, shrink=shrink)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    except GateInterrupted as stop:
        stderr.print(f"interrupted: the gate verified {stop.done} of {stop.total} kernels (those are stored); it "
                     "neither passed nor failed", markup=False)
        raise typer.Exit(130) from None
    except KeyboardInterrupt:  # before any kernel was under way
        stderr.print("interrupted: the gate verified no kernel; it neither passed nor failed", markup=False)
        raise typer.Exit(130) from None
    failed = [r for r in results if not r.ok]
    if json_output:
        typer.echo(json.dumps({"passed": not failed, "results": [r.as_json() for r in results]}))
    else:
        render.print_table(render.gate_table(results))
    for result in failed:
        stderr.print(f"[bold red]FAILED[/] {escape(result.problem)} ({escape(str(result.kernel))}): {result.verdict}: "
                     f"{escape(result.reasons[0]) if result.reasons else ''}")
    if failed:
        raise typer.Exit(EXIT_NOT_ACCEPTED)


def _model_spec(model: str | None, judge_model: str | None, base_url: str | None, api_key_env: str | None,
                temperature: float | None, reasoning_effort: str | None, prices: str | None) -> ModelSpec:
    from agent.run_spec import ModelSpec

    if reasoning_effort not in (None, "low", "medium", "high"):
        raise _fail(f"--reasoning-effort {reasoning_effort!r}: choose low, medium or high")
    return ModelSpec(model=model, judge_model=judge_model, base_url=base_url, api_key_env=api_key_env,
                     temperature=temperature, reasoning_effort=reasoning_effort, prices=prices)


def _interrupted(stop: RunInterrupted) -> typer.Exit:
    stderr.print(f"interrupted: run {stop.run_id} is marked `interrupted`; continue it with\n  "
                 f"{stop.resume_command}", markup=False)
    return typer.Exit(130)


def _print_optimize(summary: dict[str, Any], json_output: bool) -> None:
    from kernelwright import render

    if json_output:
        typer.echo(json.dumps(summary))
    else:
        render.print_table(render.optimize_table(summary))
    if summary.get("message"):
        stderr.print(f"run {summary['run_id']} failed: {summary['message']}", markup=False)
    if summary["best"] is None:
        raise typer.Exit(EXIT_NOT_ACCEPTED)


@app.command("optimize")
def optimize_command(
    problem: Optional[str] = typer.Argument(None, metavar="PROBLEM", help="Problem file or bundled problem name (optional with "
                                                       "--resume)."),
    device: str = typer.Option("auto", callback=_device_option, metavar=DEVICE_CHOICES, help="cpu, cuda or auto (cuda when a GPU is "
                                                                      "visible)."),
    model: Optional[str] = typer.Option(None, help="Model name (default gpt-4o), or scripted:FILE for replies "
                                                   "from a file."),
    judge_model: Optional[str] = typer.Option(None, help="A different model for the judge (default: --model)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1."),
    api_key_env: Optional[str] = typer.Option(None, help="Name of the environment variable holding the key "
                                                         "(default OPENAI_API_KEY)."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature."),
    reasoning_effort: Optional[str] = typer.Option(None, help="low, medium or high (reasoning models)."),
    prices: Optional[str] = typer.Option(None, help="JSON price table to add: {model: {input, output}} USD/1M."),
    rounds: int = typer.Option(4, min=1, help="Rounds, the seed round included."),
    candidates: int = typer.Option(1, min=1, help="Candidates per round: written concurrently, built in "
                                                  "parallel, timed one at a time."),
    patience: int = typer.Option(2, min=1, help="Stop after this many rounds without improvement."),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="Token budget for the whole run."),
    budget_usd: Optional[float] = typer.Option(None, min=0.0, help="Dollar budget for the whole run."),
    time_limit: Optional[float] = typer.Option(None, min=1.0, help="Seconds after which no new round starts."),
    workers: Optional[int] = typer.Option(None, min=1, help="Compile workers (default: cores and memory allow)."),
    executor: str = typer.Option("local", help="local, or ray (a local 127.0.0.1 cluster, or --ray-address)."),
    ray_address: Optional[str] = typer.Option(None, help="Address of an existing Ray cluster."),
    resume: Optional[str] = typer.Option(None, help="Continue this run where it stopped, with its stored models "
                                                    "and budgets (model options given here replace the stored "
                                                    "ones)."),
    shrink: bool = _flag(False, help="Rescale the problem's sizes to the CPU budget first (KernelBench on the "
                                     "CPU); results are marked as shrunk."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    json_output: bool = _flag(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """One PyTorch program in, the fastest verified kernel out (best.py and report.md in runs/RUN_ID/)."""
    from agent.config import OptimizeConfig
    from kernelwright.interrupts import RunInterrupted
    from kernelwright.optimize_service import run_optimize

    config = OptimizeConfig(device=device, rounds=rounds, candidates=candidates, patience=patience,
                            max_tokens=max_tokens, budget_usd=budget_usd, time_limit_s=time_limit, workers=workers,
                            executor=executor, ray_address=ray_address)
    models = _model_spec(model, judge_model, base_url, api_key_env, temperature, reasoning_effort, prices)
    try:
        summary = run_optimize(problem, config, models, db, resume, progress=_lines(), shrink=shrink)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    except RunInterrupted as stop:
        raise _interrupted(stop) from None
    _print_optimize(summary, json_output)


@app.command("rerun")
def rerun_command(
    run_id: str = typer.Argument(..., metavar="RUN_ID", help="An optimize run whose stored spec is run again as a new run."),
    fresh_exemplars: bool = _flag(False, "--fresh-exemplars", help="Draw exemplars from everything the store "
                                                                  "holds now, not from what the original run saw."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    json_output: bool = _flag(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Start a new run from a run's record: the same problem, models, endpoint, sampling, budgets, policy and
    exemplars."""
    from kernelwright.interrupts import RunInterrupted
    from kernelwright.optimize_service import rerun_optimize

    try:
        summary = rerun_optimize(run_id, db, progress=_lines(), fresh_exemplars=fresh_exemplars)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    except RunInterrupted as stop:
        raise _interrupted(stop) from None
    _print_optimize(summary, json_output)


@app.command("export")
def export_command(
    output: Path = typer.Argument(..., metavar="OUTPUT", help="The JSONL file to write."),
    format: str = typer.Option("rl", "--format", help="sft, rl or preference."),
    run: Optional[list[str]] = typer.Option(None, "--run", help="Only these runs (repeatable)."),
    min_speedup: float = typer.Option(0.0, help="Accepted kernels below this speedup are left out."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Export training data: SFT (curated rationale + kernel), RL (prompt, completion, reward), preference pairs."""
    from kernelwright.export_service import export_dataset

    try:
        count = export_dataset(format, output, db, run, min_speedup)
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    stderr.print(f"wrote {count} {format} records to {output}")


def _per_round(candidates: str | None) -> int:
    """`sweep --candidates` is the number per round, as in `optimize`; a folder of solutions is --solutions."""
    if candidates is None:
        return 1
    if candidates.isdigit() and int(candidates) >= 1:
        return int(candidates)
    raise _fail(f"--candidates {candidates!r}: it is the number of candidates per round (as in optimize); to "
                f"verify a folder of solutions use --solutions {candidates}")


@app.command("sweep")
def sweep_command(
    path: Optional[Path] = typer.Argument(None, metavar="PATH", help="Problem folder (a KernelBench checkout works; default: the "
                                                     "bundled problems)."),
    level: Optional[str] = typer.Option(None, help="Comma-separated levels, e.g. 1,2."),
    problems: Optional[list[str]] = typer.Option(None, "--problem", "--problems",
                                                 help="Only problems with this id or name (any case), or glob "
                                                      "(case-sensitive: '*Max*' is not Softmax); repeatable."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many problems."),
    sample: Optional[int] = typer.Option(None, min=1, help="A random sample of this many problems."),
    seed: int = typer.Option(0, help="Seed of --sample."),
    solutions: Optional[Path] = typer.Option(None, "--solutions", help="Verify the solutions in this folder "
                                                                       "instead of optimizing."),
    device: str = typer.Option("auto", callback=_device_option, metavar=DEVICE_CHOICES, help="cpu, cuda, cuda-compile-only or auto."),
    workers: Optional[int] = typer.Option(None, min=1, help="Compile workers, and problems optimized at once "
                                                            "(default: cores and memory allow)."),
    executor: str = typer.Option("local", help="local, or ray (a local 127.0.0.1 cluster, or --ray-address)."),
    ray_address: Optional[str] = typer.Option(None, help="Address of an existing Ray cluster."),
    shrink: bool = _flag(False, help="Rescale each problem to the CPU budget first."),
    baselines: bool = _flag(False, help="Also time eager PyTorch and torch.compile (measured once, reused)."),
    profile: bool = _flag(False, "--profile", help="Store Nsight Compute metrics of accepted CUDA kernels "
                                                  "(candidates mode; optimize profiles what its judge reads)."),
    timeout: float = typer.Option(300.0, min=1.0, help="Run clock per evaluation (builds excluded)."),
    build_timeout: float = typer.Option(900.0, "--build-timeout", min=1.0, help="Seconds per extension build."),
    model: Optional[str] = typer.Option(None, help="Model for optimize mode (default gpt-4o), or scripted:FILE."),
    judge_model: Optional[str] = typer.Option(None, help="A different model for the judge (default: --model)."),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint."),
    api_key_env: Optional[str] = typer.Option(None, help="Name of the variable holding the key (default "
                                                         "OPENAI_API_KEY)."),
    temperature: Optional[float] = typer.Option(None, help="Sampling temperature."),
    reasoning_effort: Optional[str] = typer.Option(None, help="low, medium or high (reasoning models)."),
    rounds: int = typer.Option(4, min=1, help="Rounds per problem (optimize mode)."),
    candidates: Optional[str] = typer.Option(None, "--candidates", metavar="N",
                                             help="Candidates per round (optimize mode), as in optimize."),
    resume: Optional[str] = typer.Option(None, help="Continue this sweep: finished problems are skipped."),
    db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
    json_output: bool = _flag(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Run over a folder of problems: verify existing solutions (--solutions) or optimize each one."""
    from agent.config import OptimizeConfig
    from harness import EvalPolicy
    from kernelbench.bundled import PROBLEMS_ROOT
    from kernelwright import render
    from kernelwright.interrupts import RunInterrupted
    from kernelwright.sweep_service import run_sweep, select_problems
    from sweeps.sweep import SweepConfig

    policy = EvalPolicy(timeout_s=timeout, build_timeout_s=build_timeout)
    optimize = None if solutions else OptimizeConfig(device=device, rounds=rounds, candidates=_per_round(candidates),
                                                     policy=policy, workers=workers, executor=executor,
                                                     ray_address=ray_address)
    config = SweepConfig(mode="candidates" if solutions else "optimize",
                         candidates_dir=str(solutions) if solutions else None, device=device, workers=workers,
                         executor=executor, ray_address=ray_address, baselines=baselines, profile=profile, policy=policy,
                         optimize=optimize, shrink=shrink)
    models = _model_spec(model, judge_model, base_url, api_key_env, temperature, reasoning_effort, None)
    try:
        selected = None if resume else select_problems(path or PROBLEMS_ROOT, _levels(level), problems, limit,
                                                       sample, seed, shrink)
        summary = run_sweep(selected, config, models, db, resume, progress=_lines())
    except _user_errors() as exc:
        raise _fail(str(exc)) from None
    except RunInterrupted as stop:
        raise _interrupted(stop) from None
    if json_output:
        typer.echo(json.dumps(summary))
    else:
        render.print_table(render.sweep_table(summary))


@runs_app.command("list")
def runs_list_command(db: Optional[str] = typer.Option(None, "--db", help=DB_HELP), json_output: bool = _flag(False, "--json", help="Print JSON on stdout.")) -> None:
    """Every run, newest first."""
    from kernelwright import render
    from kernelwright.runs_service import runs_list

    _emit(_guarded(runs_list, db), json_output, render.runs_table)


@runs_app.command("show")
def runs_show_command(run_id: str = typer.Argument(..., metavar="RUN_ID", help="A run id (see runs list)."),
                      db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
                      json_output: bool = _flag(False, "--json", help="Print JSON on stdout.")) -> None:
    """One run: its problems or rounds, verdicts, speedups and metrics."""
    from kernelwright import render
    from kernelwright.runs_service import run_details

    _emit(_guarded(run_details, db, run_id), json_output, render.run_table)


@runs_app.command("best")
def runs_best_command(problem: str = typer.Argument(..., metavar="PROBLEM", help="A problem name or key, e.g. "
                                                                                  "ReLU or level1/1_ReLU."),
                      db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
                      json_output: bool = _flag(False, "--json", help="Print JSON on stdout.")) -> None:
    """The fastest accepted kernels of a problem across all runs."""
    from kernelwright import render
    from kernelwright.runs_service import problem_best

    _emit(_guarded(problem_best, db, problem), json_output, render.best_table)


@runs_app.command("compare")
def runs_compare_command(first: str = typer.Argument(..., metavar="RUN_A", help="The first run."),
                         second: str = typer.Argument(..., metavar="RUN_B", help="The run compared with it."),
                         db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
                         json_output: bool = _flag(False, "--json", help="Print JSON on stdout.")) -> None:
    """Two runs side by side, per problem."""
    from kernelwright import render
    from kernelwright.runs_service import compare_runs

    _emit(_guarded(compare_runs, db, first, second), json_output, render.compare_table)


@app.command("report")
def report_command(run_id: str = typer.Argument(..., metavar="RUN_ID", help="A run id (see runs list)."),
                   db: Optional[str] = typer.Option(None, "--db", help=DB_HELP),
                   output: Optional[str] = typer.Option(None, help="Folder (default runs/RUN_ID).")) -> None:
    """Write report.html (plots, per-problem table, kernels) and summary.md for a run."""
    from kernelwright.runs_service import write_run_report

    html_path, markdown_path = _guarded(write_run_report, db, run_id, output)
    typer.echo(html_path)
    stderr.print(f"wrote {html_path} and {markdown_path}")
