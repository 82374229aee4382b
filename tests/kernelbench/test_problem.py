from pathlib import Path

import pytest

from kernelbench import ProblemError, load_problem, load_problems
from kernelbench.bundled import bundled_candidate, bundled_problems, find_bundled, resolve_problem

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def _write(path: Path, text: str = PROBLEM) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_single_file_gets_level_and_id_from_its_path(tmp_path: Path) -> None:
    problem = load_problem(_write(tmp_path / "level2" / "17_Double_It.py"))
    assert (problem.level, problem.problem_id, problem.name) == (2, 17, "Double_It")
    assert problem.key == "level2/17_Double_It"
    assert len(problem.fingerprint) == 64


def test_fingerprint_follows_content_not_path(tmp_path: Path) -> None:
    a = load_problem(_write(tmp_path / "a.py"))
    b = load_problem(_write(tmp_path / "b.py"))
    c = load_problem(_write(tmp_path / "c.py", PROBLEM.replace("x * 2", "x * 3")))
    assert a.fingerprint == b.fingerprint != c.fingerprint


def test_kernelbench_checkout_layout_with_level_filter(tmp_path: Path) -> None:
    root = tmp_path / "KernelBench"
    for rel in ("level1/2_B.py", "level1/10_C.py", "level1/1_A.py", "level2/1_D.py", "level3/1_E.py"):
        _write(root / "KernelBench" / rel)
    problems = load_problems(root)
    assert [p.key for p in problems] == ["level1/1_A", "level1/2_B", "level1/10_C", "level2/1_D", "level3/1_E"]
    assert [p.key for p in load_problems(root, levels={2})] == ["level2/1_D"]


def test_plain_folder_skips_non_problems(tmp_path: Path) -> None:
    _write(tmp_path / "ok.py")
    _write(tmp_path / "helper.py", "x = 1\n")
    assert [p.name for p in load_problems(tmp_path)] == ["ok"]


def test_malformed_file_in_a_level_folder_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path / "level1" / "1_A.py")
    _write(tmp_path / "level1" / "2_Broken.py", "class Model: pass\n")
    with pytest.raises(ProblemError, match="get_inputs"):
        load_problems(tmp_path)


def test_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no such problem file"):
        load_problem(tmp_path / "missing.py")
    with pytest.raises(ProblemError, match="not valid Python"):
        load_problem(_write(tmp_path / "bad.py", "def (:\n"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProblemError, match="no KernelBench problems"):
        load_problems(tmp_path / "empty")


def test_bundled_set_covers_the_required_kinds() -> None:
    problems = bundled_problems()
    assert len(problems) >= 12
    names = " ".join(p.name for p in problems).lower()
    for kind in ("relu", "gelu", "sum", "softmax", "layernorm", "matrix_multiplication", "conv2d", "mseloss",
                 "max", "gemm", "mlp"):
        assert kind in names, kind
    assert {p.level for p in problems} == {1, 2, 3}
    for problem in problems:  # every bundled problem ships an honest CPU kernel
        assert bundled_candidate(problem).is_file()


def test_bundled_lookup_by_name_stem_or_key() -> None:
    assert find_bundled("relu").key == "level1/1_ReLU"
    assert find_bundled("1_ReLU").key == "level1/1_ReLU"
    assert find_bundled("level3/1_MLP").name == "MLP"
    with pytest.raises(ProblemError, match="Bundled:"):
        resolve_problem("no_such_problem")
