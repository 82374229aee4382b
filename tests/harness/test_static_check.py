from harness.policy import EvalPolicy
from harness.static_check import check_candidate


def test_syntax_error_is_a_compile_error_with_the_line() -> None:
    report = check_candidate("class ModelNew(:\n    pass\n", EvalPolicy())
    assert report.verdict == "compile_error"
    assert "line 1" in report.errors[0]


def test_missing_model_new_is_rejected() -> None:
    report = check_candidate("import torch\nclass Model: pass\n", EvalPolicy())
    assert report.verdict == "rejected" and "ModelNew" in report.errors[0]


def test_plain_torch_candidate_is_rejected_when_a_kernel_is_required() -> None:
    source = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    assert check_candidate(source, EvalPolicy()).verdict == "rejected"
    relaxed = check_candidate(source, EvalPolicy(require_custom_kernel=False))
    assert relaxed.verdict is None and "no custom kernel" in relaxed.notes[0]


def test_kernel_built_with_either_loader_passes() -> None:
    for call in ("load_inline(name='x', cpp_sources='')", "cpp_extension.load(name='x', sources=['a.cpp'])"):
        source = f"from torch.utils import cpp_extension\nfrom torch.utils.cpp_extension import load_inline\next = {call}\nclass ModelNew: pass\n"
        assert check_candidate(source, EvalPolicy()).verdict is None
