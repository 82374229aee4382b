"""The population search: an archive diverse by approach, a round's slots spread over the best and the different,
and a combine move; the greedy search stays the same."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from agent.config import OptimizeConfig
from agent.run_spec import ModelSpec
from agent.search.population import Archive, Member, signature
from kernelwright.optimize_service import run_optimize
from store import LLMCallRow, open_store
from tests.agent.fake_executor import ScriptedExecutor, coder_reply, fake_kernel, judge_reply

THREADED = fake_kernel("accepted 1.6", 'cpp = "#pragma omp parallel for"')
BLOCKED = fake_kernel("accepted 1.3", 'cpp = "const int TILE = 64;"')
PLAIN = fake_kernel("accepted 1.1")


def _coder_prompts(tmp_path: Path, replies: list[dict[str, str]], **config: object) -> list[LLMCallRow]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": replies}))
    db = f"sqlite:///{tmp_path / 'population.db'}"
    options = {"device": "cpu", "patience": 9, "sol_target": 0, "min_gain_per_call": 0, **config}
    run_optimize("relu", OptimizeConfig(**options), ModelSpec(model=f"scripted:{script}"), db,
                 executor=ScriptedExecutor())
    with open_store(db)() as session:
        return [c for c in session.scalars(select(LLMCallRow).order_by(LLMCallRow.id)) if c.purpose == "coder"]


def test_signature_tells_approaches_apart() -> None:
    assert signature(THREADED) == "openmp" and signature(BLOCKED) == "blocked" and signature(PLAIN) == "plain"


def test_the_archive_keeps_the_best_of_each_approach_and_plans_over_them() -> None:
    archive = Archive(per_approach=1)
    for key, speed, approach in (("a", 1.6, "openmp"), ("b", 1.3, "blocked"), ("c", 1.5, "openmp"), ("d", 1.1, "plain")):
        archive.add(Member(key, key, speed, approach))
    assert [m.key for m in archive.leaders()] == ["a", "b", "d"]  # c: a slower openmp kernel than a
    plans = archive.plan(4, 1)
    assert [p.kind for p in plans] == ["best", "combine", "parent", "parent"]
    assert [m.key for m in plans[1].parents] == ["a", "b"] and [p.parents[0].key for p in plans[2:]] == ["b", "d"]
    assert [p.kind for p in archive.plan(1, 1)] == ["best"] and [p.kind for p in archive.plan(1, 2)] == ["combine"]
    assert [m.key for m in archive.plan(2, 3)[1].parents] == ["a", "d"]  # (a, b) had its two tries
    single = Archive()
    single.add(Member("a", "a", 1.6, "openmp"))
    single.add(Member("b", "b", 1.2, "openmp+simd"))  # holds all openmp has: combining the two brings nothing
    assert [p.kind for p in single.plan(3, 2)] == ["best", "explore", "parent"]
    alone = Archive()
    alone.add(Member("a", "a", 1.6, "openmp"))
    assert [p.kind for p in alone.plan(3, 2)] == ["best", "explore", "best"]  # one approach: look for another


def test_a_population_round_spreads_its_slots_over_parents_and_combines(tmp_path: Path) -> None:
    replies = [coder_reply(THREADED), coder_reply(BLOCKED), coder_reply(PLAIN),
               judge_reply("unroll the inner loop"), *[coder_reply(fake_kernel(f"accepted 1.{n}")) for n in range(3)]]
    coders = [c.messages[-1]["content"] for c in _coder_prompts(tmp_path, replies, rounds=2, candidates=3,
                                                                  search="population") if c.round == 1]
    assert "Make this change: unroll the inner loop" in coders[0] and THREADED.strip() in coders[0]
    assert "combine two approaches" in coders[1] and THREADED.strip() in coders[1] and BLOCKED.strip() in coders[1]
    assert "the reviewer said of it: <evaluation-output> scripted" in coders[1]  # the best's diagnosis, quoted
    assert "another approach than the run's fastest (blocked, measured 1.30x)" in coders[2]
    assert BLOCKED.strip() in coders[2] and "unroll the inner loop" not in coders[2]


def test_an_explore_move_asks_for_an_approach_the_archive_lacks(tmp_path: Path) -> None:
    also_threaded = fake_kernel("accepted 1.5", 'cpp = "#pragma omp parallel for"  # another one')
    replies = [coder_reply(THREADED), coder_reply(also_threaded), judge_reply("unroll"),
               coder_reply(fake_kernel("accepted 1.7")), coder_reply(fake_kernel("accepted 1.8"))]
    coders = [c.messages[-1]["content"] for c in _coder_prompts(tmp_path, replies, rounds=2, candidates=2,
                                                                  search="population") if c.round == 1]
    assert "Make this change: unroll" in coders[0]
    assert "a different approach from every kernel so far (their approaches: openmp)" in coders[1]


def test_greedy_rounds_start_every_slot_from_the_best(tmp_path: Path) -> None:
    replies = [coder_reply(THREADED), coder_reply(BLOCKED), coder_reply(PLAIN),
               judge_reply("unroll the inner loop"), *[coder_reply(fake_kernel(f"accepted 1.{n}")) for n in range(3)]]
    coders = [c.messages[-1]["content"] for c in _coder_prompts(tmp_path, replies, rounds=2, candidates=3)
              if c.round == 1]
    assert len(set(coders)) == 1 and "combine two approaches" not in coders[0]
