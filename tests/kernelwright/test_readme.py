"""The README keeps its promises: its two commands first, at most 300 lines, every `kernelwright` command and flag
it shows exists, and the tutorial's problem file is one kernelwright loads and measures."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_two_commands_come_first_and_the_readme_stays_short() -> None:
    text = README.read_text()
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block.splitlines()[0].startswith("make demo") and first_block.splitlines()[1].startswith("make test")
    assert len(text.splitlines()) <= 300


def test_every_command_and_flag_the_readme_shows_exists() -> None:
    from tests.kernelwright.test_what_users_read import _cli_flags

    text = README.read_text()
    flags = _cli_flags()
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]", text)) - {"--index-url"}  # pip's, in set-up
    assert named - flags == set(), named - flags
    import typer

    from kernelwright.cli import app

    commands = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    shown = set(re.findall(r"(?:^|`)kernelwright ([a-z][a-z-]+)", text, re.M))  # in code: a line or a span
    assert {"optimize", "eval", "gate", "export-op", "runs"} <= shown
    assert shown <= commands, shown - commands


def test_the_tutorials_problem_file_loads_and_measures() -> None:
    from kernelbench.problem import problem_from_source
    from kernelbench.shrink import measure

    source = re.search(r"```python\n# my_gelu_scale.py\n(.*?)```", README.read_text(), re.S).group(1)
    problem = problem_from_source(source, "my_gelu_scale")
    assert measure(problem.source).bytes == 2 * 64 * 4096 * 4  # input and output
