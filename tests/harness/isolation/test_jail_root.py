"""A jail that holds only what the child needs (issue 44, family 4): the jailed process's file system is a root of
its own, built from the system folders (`jail.SYSTEM`), the interpreter and its packages, the harness's own packages,
the precompiled headers and its scratch folder (its build is copied there). Before, it was a read-only view of the
whole machine with a few folders covered, and a candidate read other projects' files, an optimize transcript, a
results store and files under root's home, and carried them out in its exception text."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from harness.isolation.jail import COVERED, SYSTEM
from harness.records import Check
from harness.isolation.session import needed_folders
from tests.conftest import REPO, relu_variant
from tests.harness.isolation.jailed import NEEDS_ROOT, jailed
from tests.harness.isolation.test_jail_contents import _what_the_candidate_saw

pytestmark = NEEDS_ROOT
PRIVATE = ("/dev", "/proc")  # its own: the device nodes, its own PID namespace (its /tmp is walked: empty)

# run in the jail: every path it can reach, walking down from / while a folder is not one it was given
_WALK = """
import json, os, sys
given, covered, needed = json.loads(sys.argv[1])
def under(path, folders):
    return any(path == g or path.startswith(g.rstrip("/") + "/") for g in folders)
def inside(path):  # a covered folder (/usr/local) is walked: only what the child needs of it may be there
    return under(path, given) and (not under(path, covered) or under(path, needed))
seen, stack = [], ["/"]
while stack and len(seen) < 5000:  # a view of the whole machine would take minutes to list
    folder = stack.pop()
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        seen.append(path)
        if not inside(path) and os.path.isdir(path) and not os.path.islink(path):
            stack.append(path)
print("SEEN=" + json.dumps(seen))
"""


def _ancestors(path: str) -> set[str]:
    parts = Path(path).parts
    return {str(Path(*parts[:i])) for i in range(2, len(parts))}


@pytest.mark.proves(Check.JAIL_ROOT)
def test_the_jail_shows_only_what_the_child_needs(tmp_path: Path) -> None:
    """Every path the jailed process can list is one it was given or a folder on the way to one: no home folder,
    other repository, store, transcript or other build. The list is the contract; a new entry fails here."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "walk.py").write_text(_WALK)
    needed = [*(str(f) for f in needed_folders()), *(str(f.resolve()) for f in needed_folders())]
    given = [*SYSTEM, *PRIVATE, *needed, str(work.resolve())]
    if any(n.startswith("nvidia") for n in os.listdir("/dev")):
        given.append("/sys")  # the GPU driver reads it
    log = jailed(tmp_path, f"{sys.executable} walk.py '{json.dumps([given, list(COVERED), needed])}'")
    seen = json.loads(log.split("SEEN=")[1].splitlines()[0])
    on_the_way = set().union(*(_ancestors(g) for g in given))

    def shown(path: str) -> bool:  # given, and inside a covered folder only where the child needs it
        inside = (lambda folders: any(path == g or path.startswith(g.rstrip("/") + "/") for g in folders))
        return inside(given) and (not inside(list(COVERED)) or inside(needed) or path in COVERED)

    extra = [p for p in seen if p not in on_the_way | {"/tmp"} and not shown(p)]
    assert not extra, extra
    assert str(work.resolve()) in seen and "/tmp" in seen and "/usr" in seen and str(REPO / "harness") in seen, seen
    local = sorted(p for p in seen if p.startswith("/usr/local/"))  # /usr/local/etc, /usr/local/bin/docker...
    assert all(shown(p) or p in on_the_way for p in local), local


@pytest.fixture
def planted() -> Path:
    """An optimize run's transcript in the project's git-ignored runs folder, beside the harness's code."""
    folder = REPO / "runs" / f"jail-probe-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    transcript = folder / "transcript.jsonl"
    transcript.write_text('{"prompt": "planted-secret"}\n')
    yield transcript
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.proves(Check.JAIL_ROOT)
def test_a_candidate_reads_nothing_outside_by_a_known_path(planted: Path) -> None:
    """First form: it opens the paths it knows (the harness's source names them): the transcript, root's home,
    the project's git history."""
    places = {"transcript": str(planted), "home": os.path.expanduser("~"), "git": str(REPO / ".git")}
    seen = _what_the_candidate_saw(places, "pathlib.Path(_place).read_text()[:40] if "
                                           "pathlib.Path(_place).is_file() else sorted(os.listdir(_place))[:8]")
    assert seen["transcript"] == "FileNotFoundError", seen
    assert seen["git"] == "FileNotFoundError", seen
    assert not isinstance(seen["home"], list) or set(seen["home"]) <= {".pyenv", ".local"}, seen


@pytest.mark.slow
@pytest.mark.proves(Check.JAIL_ROOT)
def test_a_candidate_finds_nothing_outside_by_walking_from_its_own_code(planted: Path) -> None:
    """Second form: it discovers what is there, from the folder the harness's package lives in up to its parent
    (other repositories and worktrees beside this one)."""
    finder = ("[str(p) for p in pathlib.Path(_place).glob('*/*/transcript.jsonl')] + "
              "sorted(os.listdir(pathlib.Path(_place).parent))")
    seen = _what_the_candidate_saw({"project": str(REPO)}, finder)
    assert str(planted) not in seen["project"], seen
    assert set(seen["project"]) <= {REPO.name}, seen  # its parent holds only the way to the code


@pytest.mark.slow
def test_an_honest_candidate_still_builds_loads_and_is_accepted() -> None:
    """The control: the bundled ReLU (a build in the jail, its binary copied into the scratch folder) and the
    record says the jail's root held."""
    from harness.pipeline import evaluate
    from harness.policy import EvalPolicy
    from harness.records import Verdict
    from kernelbench.bundled import find_bundled

    evaluation = evaluate(find_bundled("relu"), relu_variant("return relu_ext.relu_forward(x)"), "cpu",
                          EvalPolicy(timing_budget_s=0.2))
    assert evaluation.verdict is Verdict.ACCEPTED, evaluation.reasons
    assert evaluation.isolation["file_system"].startswith("its own root"), evaluation.isolation
