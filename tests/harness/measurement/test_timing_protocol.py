"""The CPU timing protocol against candidates written as a hostile model would write them, one per family that
got large fake speedups through the child-staged protocol, and the invariants that close them
(harness/measurement/frozen_calls.py): the parent writes every input into the frozen child and reads every output
itself, every call is made the same way, the values come from the parent's secret generator, and the other side
is frozen and both are pinned to the same CPUs. All reuse the bundled ReLU kernel (one cached build)."""

from __future__ import annotations

import os
import shutil

import pytest

from harness.pipeline import evaluate
from harness.policy import EvalPolicy
from harness.records import Check, Verdict
from kernelbench.bundled import find_bundled
from kernelbench.problem import problem_from_source
from tests.conftest import REPO, relu_variant

pytestmark = pytest.mark.slow
RELU = find_bundled("relu")
NO_STATIC = EvalPolicy(timing_budget_s=0.2, static_policy="off")  # as if the static policy had been evaded


def _accepted_at_an_honest_speed(source: str, problem=RELU, most: float = 1.5, policy: EvalPolicy = NO_STATIC):
    """The one verdict the defence produces for these candidates: accepted, timed by the parent-driven protocol
    (no `[protocol]` reason), and no faster than the honest kernel it wraps (about 1x). Each test's docstring gives
    the speedup the same candidate reaches with its defence off, so a candidate that is merely slow cannot pass
    for a defended one."""
    evaluation = evaluate(problem, source, "cpu", policy)
    assert evaluation.verdict is Verdict.ACCEPTED, (evaluation.verdict, evaluation.reasons)
    assert evaluation.isolation["protocol"] == "parent-driven", evaluation.isolation
    assert not any(r.startswith("[protocol]") for r in evaluation.reasons), evaluation.reasons
    assert evaluation.speedup < most, f"fake speedup accepted: {evaluation.speedup:.2f}x {evaluation.reasons}"
    return evaluation


# Patches the harness's own probe and output packing in its process, so checks read the real answer while the
# timed calls return nothing of value.
PATCHED_PROBES = '''
import sys
_child = sys.modules.get("harness.child.main")
if _child is not None:
    def _honest(original):
        def patched(self, command):
            self.outputs = [torch.relu(inputs[0]) for inputs in getattr(self, "staged", [])] or self.outputs
            return original(self, command)
        return patched
    for _name in ("do_probe", "do_outputs"):
        setattr(_child.Child, _name, _honest(getattr(_child.Child, _name)))
'''


def test_the_harness_program_these_attacks_patch_is_where_they_look() -> None:
    """The attacks patch harness.child.main where they find it in their process: were it missing, they would test
    nothing (their `if _child is not None` would skip the patch)."""
    source = relu_variant("return relu_ext.relu_forward(x)", prelude=(
        "import sys\nassert hasattr(sys.modules.get('harness.child.main'), 'Child'), 'the harness program is not loaded'"))
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons

def test_patching_the_harness_code_in_its_own_process_changes_nothing_the_parent_reads() -> None:
    source = relu_variant("self.calls = getattr(self, 'calls', 0) + 1\nif self.calls > 11:\n"
                          "    relu_ext.relu_forward(x[:1])  # keeps its kernel 'in use'\n"
                          "    return torch.empty_like(x)\nreturn relu_ext.relu_forward(x)", prelude=PATCHED_PROBES)
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.INCORRECT, evaluation.reasons
    assert "[timed-check]" in " ".join(evaluation.reasons)


# Where harness code in its process materialises a timed call's inputs before the clock starts (the untimed
# staging window), it computes the answer there, untimed, and forward() only looks it up.
EARLY_WORK = '''
import sys
READY = {}
_child = sys.modules.get("harness.child.main")
if _child is not None:
    _stage = _child.Child.do_stage
    def _early(self, command):
        reply = _stage(self, command)
        for inputs in self.staged:
            READY[inputs[0].data_ptr()] = relu_ext.relu_forward(inputs[0])
        return reply
    _child.Child.do_stage = _early
'''


EARLY_FORWARD = ("relu_ext.relu_forward(x[:1])  # keeps its kernel 'in use'\n"
                 "hit = READY.pop(x.data_ptr(), None)\nif hit is not None:\n    return hit\n"
                 "return relu_ext.relu_forward(x)")


@pytest.mark.proves(Check.PARENT_SLOTS)
def test_no_inputs_reach_the_process_outside_the_timed_interval() -> None:
    """What stops it: on the parent-driven protocol no harness code in the candidate's process ever holds a timed
    call's inputs before the call (`do_stage` never runs there), so its table stays empty. Defence off (the
    child-staged protocol, `gathering.gather.parent_driven` -> False, where `do_stage` does run): measured 4.0x on the
    bundled ReLU, and accepted only with its `[protocol]` reason
    (tests/harness/measurement/test_protocol_statement.py)."""
    _accepted_at_an_honest_speed(relu_variant(EARLY_FORWARD, prelude=EARLY_WORK))


# Reads the correctness trials' inputs from its own folder and the folders beside it (the reference's, other
# evaluations') when imported and answers them from a table (calling its kernel too, so every call looks alike);
# everywhere else it runs a kernel that is wrong on large magnitudes (clamped at 100), which the timed calls,
# drawn from the problem's own distribution, never reach.
TRIAL_TABLE = '''
import glob as _glob
_SEEN = []
for _path in _glob.glob("*.pt") + _glob.glob("../*/*.pt"):
    try:
        _SEEN += [t["inputs"][0] for t in torch.load(_path, weights_only=True).get("trials", [])]
    except Exception:
        pass
_ANSWERS = [(seen, torch.relu(seen)) for seen in _SEEN]
'''


def test_the_trials_inputs_never_reach_the_candidates_process_before_their_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # where a user's home is, in the checkout (runs/): the test's own home under /tmp is hidden from the jail anyway
    home = REPO / "runs" / f"test-home-{os.getpid()}"
    monkeypatch.setenv("KERNELWRIGHT_HOME", str(home))
    try:
        _assert_the_table_misses()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _assert_the_table_misses() -> None:
    source = relu_variant("out = relu_ext.relu_forward(x)\nfor seen, answer in _ANSWERS:\n"
                          "    if seen.shape == x.shape and torch.equal(seen, x):\n        return answer.clone()\n"
                          "return out.clamp(max=100.0)", prelude=TRIAL_TABLE)
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.INCORRECT, (evaluation.verdict, evaluation.reasons)
    # the table missed, so its clamped kernel met the `large` trial (magnitudes up to 1000)
    assert any(r.startswith("[correctness]") and "large" in r for r in evaluation.reasons), evaluation.reasons

INDEXED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(weight[idx] @ proj): the output depends on the integer input alone."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(512, 64))
        self.proj = nn.Parameter(torch.randn(64, 256))

    def forward(self, idx):
        return torch.relu(self.weight[idx] @ self.proj)


def get_inputs():
    return [torch.randint(0, 512, (2048,))]


def get_init_inputs():
    return []
'''


INTEGER_CACHE_FORWARD = (
    "self.calls = getattr(self, 'calls', 0) + 1\nkey = x.numpy().tobytes()\n"
    "relu_ext.relu_forward(self.proj[:1])  # keeps its kernel 'in use'\n"
    "if self.calls > 11 and key in CACHE:  # past the correctness calls and the knock-out\n"
    "    return CACHE[key].clone()\n"
    "out = relu_ext.relu_forward(self.weight[x] @ self.proj)\n"
    "if self.calls <= 11 and not torch.isnan(out).any():  # the trials' answers, never a poisoned one\n"
    "    CACHE[key] = out\nreturn out.clone()")


def integer_cache_candidate() -> str:
    return relu_variant(INTEGER_CACHE_FORWARD, prelude="CACHE = {}").replace(
        "super().__init__()", "super().__init__()\n        self.weight = nn.Parameter(torch.randn(512, 64))\n"
                              "        self.proj = nn.Parameter(torch.randn(64, 256))")


@pytest.mark.proves(Check.FRESH_INTEGERS)
def test_integer_inputs_are_fresh_in_every_timed_call() -> None:
    """A cache keyed on the integer input's values, filled by the correctness trials: every timed call would hit
    it if the timed integers were the trials' own. Defence off (`fresh_inputs._redrawn` returning the trial's
    integers unchanged): measured 4.3x and 5.0x. On: no timed call hits, and it is the honest computation."""
    # its matmul is PyTorch's (a work share near 0, which [runtime-compute] refuses since issue 44): this test is
    # about the timed integers, so the kernel-share floor is off here, as in a self-check
    _accepted_at_an_honest_speed(integer_cache_candidate(), problem_from_source(INDEXED, "indexed_projection"),
                                 policy=NO_STATIC.model_copy(update={"require_custom_kernel": False}))


def test_global_state_is_the_same_in_every_call() -> None:
    """A candidate that stops working as soon as any global switch differs from its first call's is accepted:
    no call it sees, checked, timed or not, is made differently."""
    source = relu_variant(
        "state = (torch.are_deterministic_algorithms_enabled(), torch.is_grad_enabled(), torch.get_num_threads(),\n"
        "         torch.utils.deterministic.fill_uninitialized_memory, torch.is_inference_mode_enabled())\n"
        "self.first = getattr(self, 'first', state)\n"
        "if state != self.first:\n    return torch.zeros_like(x)\nreturn relu_ext.relu_forward(x)",
        prelude="import torch.utils.deterministic")
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons


THRASHER = '''
import mmap, os, struct, time
_BEAT = mmap.mmap(-1, 8)  # shared with the fork: when forward last ran
if os.fork() == 0:  # a process of its own (no thread of the candidate's to count) that spins whenever the candidate
    while True:     # is idle, i.e. while the reference is timed, and keeps out of the candidate's own timed calls
        if time.monotonic() - struct.unpack("d", _BEAT[:8])[0] < 0.005:
            time.sleep(0.005)
            continue
        _until = time.monotonic() + 0.00005
        while time.monotonic() < _until:
            pass
'''


def test_a_process_left_spinning_only_ever_costs_the_candidate() -> None:
    """A control, not the freeze's proof. It spins whenever the candidate is idle (while the reference is timed)
    on the candidate's CPU set, which the reference shares, and keeps out of the candidate's own calls. Measured
    here with the freeze off (`ControlGroup.freeze` a no-op): 0.48x, against 0.30x with it on: on a shared CPU the
    scheduler seems to favour the woken timed process over a spinner, so this candidate gains nothing even without
    the freeze, and this test cannot show the freeze is load-bearing. What does: a frozen group makes no progress
    (tests/harness/isolation/test_cgroups.py), and the `freeze` switch's attack, a helper process that answers
    each slot as soon as the parent has written it (tests/harness/measurement/test_freeze.py: 2.5-6.0x with the
    freeze off, 0.41-0.69x with it on)."""
    source = relu_variant("_BEAT[:8] = struct.pack('d', time.monotonic())\nreturn relu_ext.relu_forward(x)",
                          prelude=THRASHER)
    _accepted_at_an_honest_speed(source, most=1.3)


def test_timed_children_are_pinned_and_driven_through_their_memory() -> None:
    evaluation = evaluate(RELU, relu_variant("return relu_ext.relu_forward(x)"), "cpu",
                          EvalPolicy(timing_budget_s=0.2))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    timing = evaluation.isolation["timing"]
    if not evaluation.isolation.get("cgroup", "none").startswith("/"):
        pytest.skip("no cgroups here: the staging protocol is used")
    assert timing["parent_reads"] and timing["timed_outputs_checked"] == timing["calls_per_model"]
    assert evaluation.isolation.get("cpuset")


def test_a_problem_whose_inputs_fill_the_slots_is_timed_one_call_at_a_time() -> None:
    """96 MB of input: two slots, so every batch (warm-up included) holds at most two calls."""
    big = problem_from_source(RELU.source.replace("batch_size = 16", "batch_size = 1536"), "relu_96mb")
    evaluation = evaluate(big, relu_variant("return relu_ext.relu_forward(x)"), "cpu",
                          EvalPolicy(timing_budget_s=0.1, trials=2))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.isolation["timing"]["batch_size"] <= 2


def test_nothing_in_the_candidates_process_holds_the_fresh_input_generators_seed() -> None:
    """It reads the job file in its scratch folder, where the pool seed of the child-staged protocol was: a
    candidate that finds one there answers wrongly, so an accepted verdict means none was there."""
    source = relu_variant(
        "job = json.loads(open('job.json').read())\nif job.get('pool_seed') is not None:\n"
        "    return torch.zeros_like(x)\nreturn relu_ext.relu_forward(x)", prelude="import json")
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons


SIGNATURE = '''
import sys


def where_it_lives(tensor):
    """The name of the mapping that holds the tensor's memory (heap, anonymous, a shared file)."""
    address = tensor.data_ptr()
    for line in open("/proc/self/maps"):
        fields = line.split()
        low, high = (int(v, 16) for v in fields[0].split("-"))
        if low <= address < high:
            return fields[5] if len(fields) > 5 else "anonymous"
    return "unmapped"


def how_it_was_called():
    frame, callers = sys._getframe(2), []
    while frame is not None:
        callers.append(frame.f_code.co_name)
        frame = frame.f_back
    return tuple(callers)
'''


def test_checked_and_timed_calls_are_made_the_same_way() -> None:
    """A candidate that answers wrongly as soon as a call reaches it differently from its first (another caller in
    the harness, inputs in another kind of memory) is accepted: the correctness trials come through the same input
    slots and the same `run` command as every timed call. It was tripped when the trials ran in the child's own
    loop on inputs it allocated."""
    source = relu_variant(
        "signature = (how_it_was_called(), where_it_lives(x))\n"
        "if 'do_knockout' in signature[0]:  # the knock-out call (poisoned kernels) is left as it is\n"
        "    return relu_ext.relu_forward(x)\n"
        "self.first = getattr(self, 'first', signature)\n"
        "if signature != self.first:\n    return torch.zeros_like(x)\nreturn relu_ext.relu_forward(x)",
        prelude=SIGNATURE)
    evaluation = evaluate(RELU, source, "cpu", NO_STATIC)
    if not evaluation.isolation.get("cgroup", "none").startswith("/"):
        pytest.skip("no cgroups here: the staging protocol is used")
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
