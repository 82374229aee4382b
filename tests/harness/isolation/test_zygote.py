"""Children forked by the zygote, tried as an attacker would: the same jail, limits and environment as a child
started from scratch, nothing left over from an earlier candidate, and exit statuses that say what happened.
The candidates here are plain Python (no build): their module code runs in the child when it is loaded."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from harness.policy import EvalPolicy
from harness.child.child_run import run_in_child
from harness.isolation.session import CHILD_PROGRAM
from kernelbench.bundled import find_bundled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the jail's namespaces need root on this machine")

_PROBE = """
import os, sys
print("probe pid", os.getpid())
print("probe fds", sorted(os.readlink(f"/proc/self/fd/{{fd}}").split(":")[0].split("/")[-1]
                          for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{{fd}}")))
print("probe processes", sum(name.isdigit() for name in os.listdir("/proc")))
print("probe secret", os.environ.get("OPENAI_API_KEY"))
print("probe home", os.environ.get("HOME"))
try:
    open({outside!r}, "w").write("planted")
    print("probe wrote outside")
except OSError:
    print("probe outside refused")
import torch
print("probe marker", getattr(torch, "_left_by_an_earlier_candidate", None))
torch._left_by_an_earlier_candidate = "yes"
print("probe capabilities", [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0])
"""


def _run(source: str, tmp_path: Path) -> tuple[str, object]:
    run = run_in_child(find_bundled("relu"), source, "build", "cpu", EvalPolicy(timeout_s=60),
                       collect=lambda scratch: (scratch / "child.log").read_text())
    return run.collected, run.outcome


def _probes(log: str) -> dict[str, str]:
    return {line.split()[1]: line.split(" ", 2)[2] for line in log.splitlines() if line.startswith("probe ")}


def test_a_forked_child_is_jailed_like_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    outside = tmp_path / "planted.txt"
    first, outcome = _run(_PROBE.format(outside=str(outside)), tmp_path)
    second, _ = _run(_PROBE.format(outside=str(outside)), tmp_path)
    probes, later = _probes(first), _probes(second)
    assert outcome.containment["started"] == "forked by the zygote"
    assert all(outcome.containment[k] == "isolated" for k in ("pid_namespace", "mount_namespace", "network"))
    assert outcome.containment["capabilities"] == "none"
    assert probes["pid"] == "1" and int(probes["processes"]) <= 2  # PID 1 of its own namespace, alone
    assert eval(probes["fds"]) == ["child.log", "child.log", "events.jsonl", "null", "pipe", "pipe"]  # no socket
    assert probes["secret"] == "None" and probes["home"] != os.environ.get("HOME")
    assert probes["outside"] == "refused" and not outside.exists()
    assert probes["capabilities"] == "0000000000000000"
    assert probes["marker"] == "None" and later["marker"] == "None"  # each fork starts from the clean zygote


def test_a_forked_child_killed_by_a_signal_is_reported_as_such(tmp_path: Path) -> None:
    _, outcome = _run("import ctypes\nctypes.string_at(0)\n", tmp_path)  # a segfault (PID 1 ignores kill())
    assert outcome.containment["started"] == "forked by the zygote" and outcome.returncode == -signal.SIGSEGV


def test_without_the_zygote_children_start_from_scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELWRIGHT_ZYGOTE", "off")
    log, outcome = _run(_PROBE.format(outside=str(tmp_path / "x")), tmp_path)
    probes = _probes(log)
    assert outcome.containment["started"] == "exec" and probes["outside"] == "refused" and probes["pid"] == "1"
    assert eval(probes["fds"]) == ["child.log", "child.log", "events.jsonl", "null", "pipe", "pipe"]


def test_the_zygote_outlives_the_thread_that_first_needed_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children die with the thread that started their parent process (PR_SET_PDEATHSIG): a worker thread that
    needed the zygote first and then ended must not take the zygote, and everyone's children, with it."""
    from harness.isolation import zygote

    monkeypatch.setattr(zygote, "_current", None)
    worker = threading.Thread(target=zygote.shared_zygote, args=(CHILD_PROGRAM,))
    worker.start()
    worker.join(120)
    started = zygote._current
    assert started is not None and not worker.is_alive()
    try:
        log, outcome = _run('print("probe alive yes")\n', tmp_path)
        assert outcome.containment["started"] == "forked by the zygote" and _probes(log)["alive"] == "yes"
        assert zygote._current is started and started.process.poll() is None
    finally:
        started.stop()
