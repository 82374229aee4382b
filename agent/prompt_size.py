"""How big the prompts are: an estimate of their tokens (about 4 characters a token for English and code; a
local model's server counts exactly), the one-line estimate a run prints at its start, and
`python -m agent.prompt_size` to print every prompt kind's size for the bundled problems."""

from __future__ import annotations

import sys
from typing import Any

from agent.config import OptimizeConfig
from agent.llm import Message
from agent.prompts import Attempt, RunContext, coder_messages, judge_messages, repair_messages
from harness.records import Verdict
from kernelbench.problem import Problem

CHARS_PER_TOKEN = 4.0


def tokens(messages: list[Message]) -> int:
    return round(sum(len(m["content"]) for m in messages) / CHARS_PER_TOKEN)


def call_estimate(problem: Problem, config: OptimizeConfig, coder: Any, hardware: str) -> str:
    """One line for the start of a run: what each call costs a slow local model."""
    first = tokens(coder_messages(problem, config.device, None, None, [], RunContext(config.policy, hardware)))
    cap = config.reply_tokens or getattr(getattr(coder, "config", None), "reply_tokens", None)
    timeout = getattr(coder, "timeout_s", None)
    return (f"prompts: about {first} tokens per coder call in round 1, about {first + 1000} later (the kernel, "
            f"its evaluation and the run's history are added); replies capped at "
            f"{f'{cap} tokens' if cap else 'the model default'}" +
            (f"; each call may take up to {timeout:.0f} s (--llm-timeout)" if timeout else ""))


def prompt_kinds(problem: Problem, device: str) -> dict[str, int]:
    """The estimated tokens of each kind of prompt for `problem`, with the bundled candidate as the kernel."""
    from kernelbench.bundled import bundled_candidate

    source = bundled_candidate(problem, device).read_text()
    context = RunContext(hardware="a CPU", history=["round 1: got 1.01x (the best so far)"])
    accepted = Attempt(source, Verdict.ACCEPTED, ["[noise] two copies of the reference read 0.985x"], 1.013,
                       0.2311, 0.2334)
    failed = Attempt(source, Verdict.COMPILE_ERROR, ["error: 'TORCH_CHECK' was not declared in this scope"])
    kernel_only = RunContext(hardware="a CPU", contract="kernel")
    return {"coder round 1": tokens(coder_messages(problem, device, None, None, [], context)),
            "kernel-only 1": tokens(coder_messages(problem, device, None, None, [], kernel_only)),
            "coder later": tokens(coder_messages(problem, device, None, accepted, [], context)),
            "judge": tokens(judge_messages(problem, device, accepted, "a CPU", context)),
            "repair": tokens(repair_messages(problem, device, failed, context))}


def main() -> None:
    from kernelbench.bundled import bundled_problems

    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    rows = {p.key: prompt_kinds(p, device) for p in bundled_problems()}
    kinds = list(next(iter(rows.values())))
    print("problem".ljust(42) + "".join(k.rjust(15) for k in kinds))
    for key, sizes in rows.items():
        print(key.ljust(42) + "".join(str(sizes[k]).rjust(15) for k in kinds))
    print("mean".ljust(42) + "".join(str(round(sum(r[k] for r in rows.values()) / len(rows))).rjust(15)
                                     for k in kinds))


if __name__ == "__main__":
    main()
