"""The coder's messages for a population slot (agent/search/population.py): the best kernel with the judge's
advice as in the greedy loop, another approach's leader, or two kernels to combine. Kernel sources and the judge's
words about them are data: fenced or quoted, never instructions."""

from __future__ import annotations

from agent.llm import Message
from agent.parse import JudgeAdvice, UnusableAdvice
from agent.prompts import Exemplar, RunContext, code_block, coder_messages, quoted_inline
from agent.search.population import Member, SlotPlan
from kernelbench.problem import Problem


def _said(member: Member) -> str:
    return f"; the reviewer said of it: {quoted_inline(member.diagnosis[:300])}" if member.diagnosis else ""


def slot_messages(plan: SlotPlan, problem: Problem, device: str, advice: JudgeAdvice | UnusableAdvice | None,
                  exemplars: list[Exemplar], context: RunContext, approaches: list[str] | None = None) -> list[Message]:
    """The messages of one coder call of a population round."""
    if plan.kind == "best" or not plan.parents:
        focus = plan.parents[0].payload if plan.parents else None
        return coder_messages(problem, device, advice, focus, exemplars, context)
    first = plan.parents[0]
    if plan.kind == "explore":
        tried = ", ".join(sorted(set(approaches))) if approaches else first.approach
        direction = (f"a different approach from every kernel so far (their approaches: {tried}): rewrite the "
                     "kernel shown below as the best so far with another way of computing the result (another loop "
                     "order, blocking, vectorization or parallel decomposition), not a tweak of it.")
        return coder_messages(problem, device, None, first.payload, exemplars, context, direction)
    if plan.kind == "parent":
        direction = (f"improve the kernel shown below as the best so far: it is this attempt's parent, another "
                     f"approach than the run's fastest ({first.approach}, measured {first.speedup:.2f}x{_said(first)})."
                     " Keep its approach and make it faster.")
        return coder_messages(problem, device, None, first.payload, exemplars, context, direction)
    second = plan.parents[1]
    direction = (f"combine two approaches in one kernel. The kernel shown below as the best so far is one "
                 f"({first.approach}, measured {first.speedup:.2f}x{_said(first)}); this is the other "
                 f"({second.approach}, measured {second.speedup:.2f}x{_said(second)}):\n"
                 f"{code_block(second.source.strip())}\nSay what each does well, then write one kernel that keeps "
                 "both.")
    return coder_messages(problem, device, None, first.payload, exemplars, context, direction)
