"""The typer CLI, a table of commands: each parses its options, calls a service function and renders the result;
it decides nothing. Shared options are in cli_options.py; registration, the error boundary (a user's mistake:
one line, exit 2; Ctrl-C: one line, exit 130) and progress are in cli_boundary.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from kernelwright import __version__
from kernelwright.cli_boundary import command, exit_unless, lines, note, progress
from kernelwright import precheck
from kernelwright.cli_options import (BudgetUsd, BuildTimeout, Db, DeviceChoice, ExecutionOptions, JsonObject,
                                      JsonRows, Levels, MaxTokens, ModelOptions, Patience, PolicyLevel, Problem,
                                      ProblemPath, Rounds, RunId, Timeout, TimingBudget, Workers, flag)

# Each command imports its service when it runs: `kernelwright --help` loads typer and rich, not torch, the
# harness's stages or SQLAlchemy.

HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(no_args_is_help=True, add_completion=False, context_settings=HELP,
                  help="LLM-written kernels, verified by a harness that treats every candidate as hostile.")
problems_app = typer.Typer(no_args_is_help=True, context_settings=HELP, help="List and inspect KernelBench-format problems.")
app.add_typer(problems_app, name="problems")
runs_app = typer.Typer(no_args_is_help=True, context_settings=HELP, help="Browse the results store: runs, best kernels, comparisons.")
app.add_typer(runs_app, name="runs")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kernelwright {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, flag("--version", callback=_version, is_eager=True,
                                        help="Print the version and exit.")] = False) -> None:
    """LLM-written kernels, verified by a harness that treats every candidate as hostile."""
    from kernelwright.settings import settle_home

    _, notice = settle_home()
    if notice:
        note(notice)


@command(app, "eval")
def eval_command(
    problem: Problem,
    candidate: Annotated[Optional[Path], typer.Argument(metavar="[CANDIDATE]", help="Candidate file defining "
                                                        "ModelNew (not with --self-check).")] = None,
    device: DeviceChoice = "auto",
    json_output: JsonObject = False,
    self_check: Annotated[bool, flag("--self-check", help="Time the problem's own Model against itself (A/A): "
                                                          "what this machine can resolve now (nothing is stored).")] = False,
    db: Db = None,
    trials: Annotated[int, typer.Option(min=1, help="Correctness trials with fresh seeds (5 covers every input "
                                                    "distribution, large magnitudes included).")] = 5,
    timeout: Timeout = 300.0,
    build_timeout: BuildTimeout = 900.0,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for reference and candidate (CPU device).")] = 1,
    shrink: Annotated[bool, flag(help="Rescale the problem's sizes to the CPU budget first.")] = False,
    policy_level: PolicyLevel = "default",
    no_store: Annotated[bool, flag("--no-store", help="Do not record the result.")] = False,
    profile: Annotated[bool, flag("--profile", help="Store Nsight Compute metrics of an accepted CUDA "
                                                    "kernel.")] = False,
    shapes: Annotated[Optional[list[str]], typer.Option(
        "--shapes", metavar="NAME=N,...", help="Sizes your callers send (the problem's size constants), checked "
        "and timed beside the problem's own; repeat for several. Default: odd sizes, non-multiples of 8/32/128, "
        "a smaller and a larger batch.")] = None,
    no_envelope: Annotated[bool, flag("--no-envelope", help="Check the problem's own sizes only (KernelBench's "
                                                            "number).")] = False,
    precision: Annotated[str, typer.Option("--precision", metavar="fp32|fp16|bf16", help="Run the problem with "
                                           "its parameters and floating inputs cast (tolerance 1e-2 at fp16/bf16, "
                                           "as KernelBench).")] = "fp32",
    timing_budget: TimingBudget = None,
    whole_model: Annotated[bool, flag("--whole-model", help="Judge a patched model (optimize-model's patched.py "
                                                            "against the model file) as optimize-model does: the "
                                                            "kernels' 5% share floor lowered, a kernel still "
                                                            "required, at least 6 process sets over 4 s.")] = False,
) -> None:
    """Judge one candidate exactly as the agent's harness would. Exit 0 accepted, 1 not accepted, 2 usage."""
    precheck.problem(problem)
    precheck.candidate(candidate)
    from kernelwright import render
    from kernelwright.eval_service import eval_holds, eval_policy, judge

    policy = eval_policy(policy_level, whole_model, trials=trials, timeout_s=timeout, cpu_threads=threads,
                         build_timeout_s=build_timeout, envelope=not no_envelope, timing_budget_s=timing_budget)
    with progress("evaluating") as say:
        outcome = judge(problem, candidate, self_check, device, policy, db, shrink=shrink, store=not no_store,
                        progress=say, profile=profile, shapes=shapes, precision=precision)
    render.print_evaluation(outcome, json_output, self_check)
    exit_unless(eval_holds(outcome, self_check))


@command(problems_app, "list")
def problems_list(
    path: Annotated[Optional[Path], typer.Argument(metavar="PATH", help="Problem file or folder (default: the "
                                                                        "bundled set).")] = None,
    level: Levels = None,
    json_output: JsonRows = False,
) -> None:
    """List problems with their level, id and content fingerprint."""
    from kernelbench.bundled import PROBLEMS_ROOT
    from kernelbench.problem import load_problems
    from kernelwright import render
    from kernelwright.problem_service import parse_levels

    problems = load_problems(path or PROBLEMS_ROOT, parse_levels(level))
    render.print_problems(problems, json_output)


@command(problems_app, "shrink")
def problems_shrink(
    path: ProblemPath,
    level: Levels = None,
    write: Annotated[Optional[Path], typer.Option("--write", metavar="DIR", help="Write every problem that shrinks "
                                                  "or fits to DIR (levelN/<id>_<Name>.py), marked as shrunk, for "
                                                  "eval, optimize, sweep and gate.")] = None,
    json_output: JsonRows = False,
) -> None:
    """Show how each problem would be rescaled to the CPU budget, and which cannot be (--write keeps the files)."""
    precheck.exists(path)
    from kernelbench.problem import load_problems
    from kernelwright import render
    from kernelwright.problem_service import parse_levels, shrink_report

    rows = shrink_report(load_problems(path, parse_levels(level)), progress=lines(), write_to=write)
    render.print_shrink(rows, json_output, write)


@command(problems_app, "check")
def problems_check(
    path: ProblemPath,
    level: Levels = None,
    device: DeviceChoice = "cpu",
    shrink: Annotated[bool, flag(help="Rescale sizes to the CPU budget first (needed for KernelBench on "
                                      "CPU).")] = True,
    output: Annotated[Optional[Path], typer.Option(help="Append each problem's row to this JSONL file as soon as "
                                                        "it is checked (a killed check keeps every finished "
                                                        "problem).")] = None,
    json_output: JsonRows = False,
) -> None:
    """Run the canaries (zeros, ones, input passthrough, constant mean): which trivial outputs pass a problem."""
    precheck.exists(path)
    from kernelbench.problem import load_problems
    from kernelwright import render
    from kernelwright.problem_service import ChecksInterrupted, check_problems, parse_levels

    try:
        rows = check_problems(load_problems(path, parse_levels(level)), device, shrink, progress=lines(),
                              output=output)
    except ChecksInterrupted as stop:  # the finished rows first, then the boundary's one line
        render.emit(stop.rows, json_output, render.check_table)
        raise
    render.emit(rows, json_output, render.check_table)


@command(app, "gate", interrupted="interrupted: the gate verified no kernel; it neither passed nor failed")
def gate_command(
    solutions: Annotated[Optional[Path], typer.Option(help="Verify a folder of KernelBench-format solutions "
                                                           "instead of the store.")] = None,
    problems_dir: Annotated[Optional[Path], typer.Option("--problems-dir", "--problems", help="Problem folder for "
                                                         "--solutions (default: the bundled set).")] = None,
    shrink: Annotated[bool, flag(help="Rescale each problem of --solutions to the CPU budget first.")] = False,
    run: Annotated[Optional[str], typer.Option(help="Only kernels of this run.")] = None,
    problem: Annotated[Optional[str], typer.Option(help="Only problems whose key contains this text.")] = None,
    device: DeviceChoice = "auto",
    db: Db = None,
    policy_level: PolicyLevel = "default",
    workers: Workers = None,
    no_store: Annotated[bool, flag("--no-store", help="Do not record the re-measurements of --solutions (those "
                                                      "of stored kernels are always kept with them).")] = False,
    min_speedup: Annotated[Optional[float], typer.Option(
        help="Also fail a kernel re-measured below this speedup (from 1.0 up: not significantly faster).")] = None,
    timing_budget: TimingBudget = None,
    json_output: JsonRows = False,
) -> None:
    """CI correctness gate: re-verify accepted kernels with new secret seeds. Exit 1 if any no longer holds."""
    precheck.folder(solutions, "solutions")
    precheck.folder(problems_dir, "problems")
    from kernelwright import render
    from kernelwright.eval_service import eval_policy
    from kernelwright.gate_service import gate_folder, gate_store

    policy = eval_policy(policy_level, timing_budget_s=timing_budget)
    with progress("verifying") as say:
        results = gate_folder(solutions, problems_dir, device, policy, progress=say, shrink=shrink, workers=workers,
                              problem_filter=problem, db_url=db, store=not no_store, run_id=run,
                              min_speedup=min_speedup) if solutions \
            else gate_store(db, device, policy, run, problem, progress=say, workers=workers, shrink=shrink,
                            min_speedup=min_speedup)
    render.print_gate(results, json_output)
    exit_unless(all(result.ok for result in results))


@command(app, "rescore")
def rescore_command(
    all_verdicts: Annotated[bool, flag("--all", help="Every stored kernel, not only those whose latest verdict is "
                                                     "accepted.")] = False,
    run: Annotated[Optional[str], typer.Option(help="Only kernels of this run.")] = None,
    problem: Annotated[Optional[str], typer.Option(help="Only problems whose key contains this text.")] = None,
    older_than: Annotated[Optional[str], typer.Option("--older-than", help="Only kernels judged by a checks' "
                                                      "version first seen in this store before VERSION "
                                                      "(`current`: any but today's; unversioned rows are older "
                                                      "than any).")] = None,
    again: Annotated[bool, flag("--again", help="Also re-judge kernels the current checks already judged on this "
                                                "device (skipped otherwise, so a stopped rescore resumes).")] = False,
    execution: ExecutionOptions = ExecutionOptions(),
    db: Db = None,
    policy_level: PolicyLevel = "default",
    json_output: JsonRows = False,
) -> None:
    """Re-judge stored kernels under the current harness with fresh seeds; each result is a new evaluation linked
    to the old one (nothing is overwritten; exports read the newest). Prints what changed, by check."""
    from kernelwright import render
    from kernelwright.eval_service import eval_policy
    from kernelwright.rescore_service import RescoreSelection, rescore_store

    selection = RescoreSelection(all_verdicts, run, problem, older_than, again)
    with progress("re-judging") as say:
        report = rescore_store(db, execution.device, eval_policy(policy_level), selection, progress=say,
                               workers=execution.workers, executor=execution.executor,
                               ray_address=execution.ray_address)
    render.print_rescore(report, json_output)


@command(app, "optimize")
def optimize_command(
    problem: Annotated[Optional[str], typer.Argument(metavar="PROBLEM", help="Problem file or bundled problem name "
                                                                             "(optional with --resume).")] = None,
    execution: ExecutionOptions = ExecutionOptions(),
    models: ModelOptions = ModelOptions(),
    prices: Annotated[Optional[str], typer.Option(help="JSON price table to add: {model: {input, output}} "
                                                       "USD/1M.")] = None,
    rounds: Rounds = 4,
    candidates: Annotated[int, typer.Option(min=1, help="Candidates per round: written concurrently, built in "
                                                        "parallel, timed one at a time.")] = 1,
    patience: Patience = 2,
    max_tokens: MaxTokens = None,
    budget_usd: BudgetUsd = None,
    time_limit: Annotated[Optional[float], typer.Option(min=1.0, help="Seconds after which no new round "
                                                                      "starts and no LLM call runs on.")] = None,
    tune_budget: Annotated[str, typer.Option(help="Per kernel that declares TUNE constants: screen at most N "
                                                  "variants (8) or N seconds (60s), no LLM call each; 0: off.")] = "8",
    search: Annotated[str, typer.Option(help="greedy (every candidate starts from the best kernel) or population "
                                             "(an archive diverse by approach, parents among the best and the "
                                             "different, a combine move).")] = "greedy",
    sol_target: Annotated[float, typer.Option(min=0.0, help="Stop once the best kernel runs at this fraction of the "
                                                            "device's roofline floor; 0: off.")] = 0.9,
    min_gain_per_call: Annotated[float, typer.Option(min=0.0, help="Stop once the best speedup gains less than "
                                                                   "this per LLM call over the last 3 rounds; 0: "
                                                                   "off.")] = 0.005,
    contract: Annotated[str, typer.Option(help="What the coder writes: file (the whole Python file), kernel (only "
                                               "the C++ op: the harness writes ModelNew from the problem), auto "
                                               "(file, then kernel after two replies without a file).")] = "auto",
    resume: Annotated[Optional[str], typer.Option(help="Continue this run where it stopped, with its stored models "
                                                       "and budgets (model options given here replace the stored "
                                                       "ones).")] = None,
    shrink: Annotated[bool, flag(help="Rescale the problem's sizes to the CPU budget first (KernelBench on the "
                                      "CPU); results are marked as shrunk.")] = False,
    timing_budget: TimingBudget = None,
    db: Db = None,
    json_output: JsonObject = False,
) -> None:
    """One PyTorch program in, the fastest verified kernel out (best.py and report.md in the run's folder, which it
    prints first)."""
    precheck.problem(problem)
    from agent.run_spec import Execution
    from kernelwright import render
    from kernelwright.optimize_service import model_spec, optimize_config, run_optimize

    config = optimize_config(Execution(**vars(execution)), rounds=rounds, candidates=candidates, patience=patience,
                             max_tokens=max_tokens, budget_usd=budget_usd, time_limit_s=time_limit,
                             tune_budget=tune_budget, timing_budget_s=timing_budget, sol_target=sol_target,
                             min_gain_per_call=min_gain_per_call, search=search,
                             contract=contract)
    summary = run_optimize(problem, config, model_spec(prices=prices, **vars(models)), db, resume,
                           progress=lines(), shrink=shrink)
    render.print_optimize(summary, json_output)
    exit_unless(summary["best"] is not None)


@command(app, "optimize-model")
def optimize_model_command(
    model_file: Annotated[Path, typer.Argument(metavar="FILE", help="Your model in KernelBench form (Model, "
                                               "get_init_inputs, get_inputs), optionally get_input_sets() -> "
                                               "[(weight, [inputs]), ...]: the shapes it is served at.")],
    plan: Annotated[bool, flag("--plan", help="Profile and extract the regions, then stop.")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", help="Folder for the plan, the regions and patched.py "
                                                "(default: <home>/models/<file>-<hash>; a rerun resumes "
                                                "there).")] = None,
    min_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="Regions under this fraction of the "
                                                                    "model's time are not searched.")] = 0.02,
    max_regions: Annotated[int, typer.Option(min=1, help="Most regions searched (the hottest first).")] = 4,
    only: Annotated[Optional[list[str]], typer.Option("--only", metavar="MODULE", help="Search only the region "
                                                      "starting at this module path (e.g. mlp.0); repeatable.")] = None,
    execution: ExecutionOptions = ExecutionOptions(),
    models: ModelOptions = ModelOptions(),
    rounds: Rounds = 4,
    candidates: Annotated[int, typer.Option(min=1, help="Candidates per round, per region.")] = 1,
    patience: Patience = 2,
    max_tokens: MaxTokens = None,
    budget_usd: BudgetUsd = None,
    time_limit: Annotated[Optional[float], typer.Option(min=1.0, help="Seconds for all regions' searches, "
                                                                      "split as the budget is.")] = None,
    search: Annotated[str, typer.Option(help="Each region's search: greedy or population (as optimize's "
                                             "--search).")] = "greedy",
    compile_baseline: Annotated[bool, flag("--compile-baseline/--no-compile-baseline", help="Also time "
                                           "torch.compile of the original model at each input set.")] = True,
    db: Db = None,
    json_output: JsonObject = False,
) -> None:
    """Your model in, its hot regions optimized, patched.py out (the regions swapped for guarded kernels) with its
    end-to-end speedup measured at every input set beside what each region promised. Exit 0 when the patched
    model is accepted faster, 1 when no region survived, 2 usage."""
    from agent.run_spec import Execution
    from kernelwright import render
    from kernelwright.model_service import make_plan, optimize_model
    from kernelwright.optimize_service import model_spec, optimize_config

    if plan:
        with progress("profiling") as say:
            made = make_plan(model_file, execution.device, out, min_share, max_regions, progress=say, only=only)
        render.print_model_plan(made, json_output)
        return
    config = optimize_config(Execution(**vars(execution)), rounds=rounds, candidates=candidates, patience=patience,
                             max_tokens=max_tokens, budget_usd=budget_usd, time_limit_s=time_limit, search=search)
    result = optimize_model(model_file, config, model_spec(**vars(models)), db, out, min_share, max_regions,
                            compile_baseline, progress=lines(), only=only)
    render.print_model_result(result, json_output)
    exit_unless(bool(result.get("kept")))


@command(app, "rerun")
def rerun_command(
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="An optimize run whose stored spec is run again "
                                                                 "as a new run.")],
    fresh_exemplars: Annotated[bool, flag("--fresh-exemplars", help="Draw exemplars from everything the store "
                                                                    "holds now, not from what the original run "
                                                                    "saw.")] = False,
    db: Db = None,
    json_output: JsonObject = False,
) -> None:
    """Start a new run from a run's record: the same problem, models, endpoint, sampling, budgets, policy and
    exemplars."""
    from kernelwright import render
    from kernelwright.optimize_service import rerun_optimize

    summary = rerun_optimize(run_id, db, progress=lines(), fresh_exemplars=fresh_exemplars)
    render.print_optimize(summary, json_output)
    exit_unless(summary["best"] is not None)


@command(app, "export")
def export_command(
    output: Annotated[Path, typer.Argument(metavar="OUTPUT", help="The JSONL file to write.")],
    format: Annotated[str, typer.Option("--format", help="sft, rl, preference or pairs.")] = "rl",
    run: Annotated[Optional[list[str]], typer.Option("--run", help="Only these runs (repeatable).")] = None,
    min_speedup: Annotated[Optional[float], typer.Option(
        help="Kernels below this speedup are no target; from 1.0 up they must also be significantly faster "
             "(default: 1.0 for sft, preference and pairs; 0 for rl).")] = None,
    reward: Annotated[str, typer.Option("--reward", help="The rl reward's definition: interval (what the "
                                        "speedup's interval guarantees) or point (the point estimate, as "
                                        "before).")] = "interval",
    db: Db = None,
) -> None:
    """Export training data: SFT (curated rationale + kernel), RL (prompt, completion, reward), preference pairs,
    slow-fast pairs; a dataset card beside it (OUTPUT.card.json)."""
    precheck.dataset_format(format)
    from kernelwright.export_service import card_path, export_dataset

    count = export_dataset(format, output, db, run, min_speedup, reward)
    note(f"wrote {count} {format} records to {output} (card: {card_path(output)})")


@command(app, "export-op")
def export_op_command(
    problem: Problem,
    candidate: Annotated[Path, typer.Argument(metavar="CANDIDATE", help="Candidate file defining ModelNew.")],
    out_dir: Annotated[Path, typer.Argument(metavar="DIR", help="Folder to write the op package into.")],
    device: DeviceChoice = "auto",
    shapes: Annotated[Optional[list[str]], typer.Option(
        "--shapes", metavar="NAME=N,...", help="Sizes your callers send (the problem's size constants): verified, "
        "and where correct added to the op's envelope; repeat for several.")] = None,
    bucket: Annotated[Optional[list[str]], typer.Option(
        "--bucket", metavar="NAME=LOW..HIGH,...", help="A range of sizes (the problem's size constants) where the op "
        "runs the kernel, verified at its corners and at samples drawn at export; repeat for several. Default: the "
        "range of the sizes verified.")] = None,
    bucket_samples: Annotated[int, typer.Option(
        min=0, help="Interior sizes sampled per bucket, besides its corners.")] = 4,
    no_test: Annotated[bool, flag("--no-test", help="Do not run the package's own test (eager, torch.compile "
                                                    "fullgraph, opcheck) in a fresh process.")] = False,
    db: Db = None,
) -> None:
    """Verify CANDIDATE at the problem's sizes and around them, and over shape buckets, then write it to DIR as a
    drop-in torch.library op that calls the reference outside them. Exit 0 exported (its test passed, every
    --bucket verified), 1 not accepted, a --bucket wrong at a sample or the test failed, 2 usage."""
    precheck.problem(problem)
    precheck.candidate(candidate)
    precheck.buckets(bucket)
    from kernelwright import render
    from kernelwright.export_op import verify_and_export

    with progress("verifying") as say:
        result = verify_and_export(problem, candidate, out_dir, device, shapes, db, run_test=not no_test,
                                   progress=say, buckets=bucket, bucket_samples=bucket_samples)
    render.print_export(result)
    exit_unless(result.holds)


@command(app, "sweep")
def sweep_command(
    path: Annotated[Optional[Path], typer.Argument(metavar="PATH", help="Problem folder (a KernelBench checkout "
                                                                        "works; default: the bundled problems).")] = None,
    level: Levels = None,
    problems: Annotated[Optional[list[str]], typer.Option("--problem", "--problems", help="Only problems with this id "
                                                          "or name (any case), or glob (case-sensitive: '*Max*' is "
                                                          "not Softmax); repeatable.")] = None,
    limit: Annotated[Optional[int], typer.Option(min=1, help="At most this many problems.")] = None,
    sample: Annotated[Optional[int], typer.Option(min=1, help="A random sample of this many problems.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = 0,
    solutions: Annotated[Optional[Path], typer.Option("--solutions", help="Verify the solutions in this folder "
                                                                          "instead of optimizing.")] = None,
    execution: ExecutionOptions = ExecutionOptions(),
    shrink: Annotated[bool, flag(help="Rescale each problem to the CPU budget first.")] = False,
    baselines: Annotated[bool, flag(help="Also time eager PyTorch and torch.compile (measured once, "
                                         "reused).")] = False,
    profile: Annotated[bool, flag("--profile", help="Store Nsight Compute metrics of accepted CUDA kernels "
                                                    "(candidates mode; optimize profiles what its judge "
                                                    "reads).")] = False,
    timeout: Annotated[float, typer.Option(min=1.0, help="Run clock per evaluation (builds excluded).")] = 300.0,
    build_timeout: BuildTimeout = 900.0,
    timing_budget: TimingBudget = None,
    models: ModelOptions = ModelOptions(),
    prices: Annotated[Optional[str], typer.Option(help="JSON price table to add: {model: {input, output}} "
                                                       "USD/1M (optimize mode).")] = None,
    rounds: Rounds = 4,
    candidates: Annotated[Optional[str], typer.Option("--candidates", metavar="N", help="Candidates per round "
                                                      "(optimize mode), as in optimize.")] = None,
    patience: Patience = 2,
    max_tokens: MaxTokens = None,
    budget_usd: BudgetUsd = None,
    resume: Annotated[Optional[str], typer.Option(help="Continue this sweep: finished problems are skipped; "
                                                       "--budget-usd or --max-tokens given here replace its "
                                                       "budget.")] = None,
    db: Db = None,
    json_output: JsonObject = False,
) -> None:
    """Run over a folder of problems: verify existing solutions (--solutions) or optimize each one."""
    precheck.exists(path)
    from agent.run_spec import Execution
    from kernelbench.bundled import PROBLEMS_ROOT
    from kernelwright import render
    from kernelwright.optimize_service import model_spec
    from kernelwright.problem_service import parse_levels
    from kernelwright.sweep_service import problems_to_sweep, run_sweep, sweep_config

    config = sweep_config(Execution(**vars(execution)), solutions, rounds, candidates, timeout, build_timeout,
                          baselines, profile, shrink, patience=patience, max_tokens=max_tokens, budget_usd=budget_usd,
                          timing_budget_s=timing_budget)
    selected = problems_to_sweep(resume, path or PROBLEMS_ROOT, parse_levels(level), problems, limit, sample, seed,
                                 shrink)
    summary = run_sweep(selected, config, model_spec(prices=prices, **vars(models)), db, resume, progress=lines())
    render.emit(summary, json_output, render.sweep_table)


@command(runs_app, "list")
def runs_list_command(db: Db = None, json_output: JsonRows = False) -> None:
    """Every run, newest first."""
    from kernelwright import render
    from kernelwright.runs_service import runs_list

    render.emit(runs_list(db), json_output, render.runs_table)


@command(runs_app, "show")
def runs_show_command(run_id: RunId, db: Db = None, json_output: JsonRows = False) -> None:
    """One run: its problems or rounds, verdicts, speedups and metrics."""
    from kernelwright import render
    from kernelwright.runs_service import run_details

    render.emit(run_details(db, run_id), json_output, render.run_table)


@command(runs_app, "best")
def runs_best_command(
    problem: Annotated[str, typer.Argument(metavar="PROBLEM", help="A problem name or key, e.g. ReLU or "
                                                                   "level1/1_ReLU.")],
    db: Db = None,
    json_output: JsonRows = False,
) -> None:
    """The fastest accepted kernels of a problem across all runs."""
    from kernelwright import render
    from kernelwright.runs_service import problem_best

    render.emit(problem_best(db, problem), json_output, render.best_table)


@command(runs_app, "compare")
def runs_compare_command(
    first: Annotated[str, typer.Argument(metavar="RUN_A", help="The first run.")],
    second: Annotated[str, typer.Argument(metavar="RUN_B", help="The run compared with it.")],
    db: Db = None,
    json_output: JsonRows = False,
) -> None:
    """Two runs side by side, per problem."""
    from kernelwright import render
    from kernelwright.runs_service import compare_runs

    render.emit(compare_runs(db, first, second), json_output, render.compare_table)


@command(app, "report")
def report_command(
    run_id: RunId,
    db: Db = None,
    output: Annotated[Optional[str], typer.Option(help="Folder (default: the run's own, RUN_ID in "
                                                        "the home).")] = None,
) -> None:
    """Write report.html (plots, per-problem table, kernels) and summary.md for a run."""
    from kernelwright.runs_service import write_run_report

    html_path, markdown_path = write_run_report(db, run_id, output)
    typer.echo(html_path)
    note(f"wrote {html_path} and {markdown_path}")
