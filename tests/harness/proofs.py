"""The registry's attack tests and its generated docs.

`proofs()` reads every `@pytest.mark.proves(Check.X)` in the test suite (from the source: no collection, no
import), so the load-bearing test (test_defences_load_bearing.py) and the docs name the same tests. The tables in
docs/defences.md and docs/verdicts.md between the GENERATED markers are rendered from the registry
(harness/checks.py) and these marks; test_registry.py fails when the committed files differ.

    python -m tests.harness.proofs --write   # after changing a row or a mark
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from harness.checks import ROWS, Row, gate_order
from harness.records import Check

REPO = Path(__file__).resolve().parents[2]
DOCS = {"defences": REPO / "docs" / "defences.md", "verdicts": REPO / "docs" / "verdicts.md"}
BEGIN = "<!-- GENERATED from harness/checks.py by `python -m tests.harness.proofs --write`: edit the rows, not this -->"
END = "<!-- END GENERATED -->"


def _marked(decorator: ast.expr) -> list[Check]:
    """The checks a `pytest.mark.proves(Check.X, ...)` decorator names."""
    if not (isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "pytest.mark.proves"):
        return []
    return [Check[arg.attr] for arg in decorator.args if isinstance(arg, ast.Attribute)]


def proofs() -> dict[Check, list[str]]:
    """Each check with the node ids of the tests that prove it, in file order."""
    found: dict[Check, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                for check in (c for d in node.decorator_list for c in _marked(d)):
                    found.setdefault(check, []).append(f"{path.relative_to(REPO)}::{node.name}")
    return found


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _verdict(row: Row, level: str) -> str:
    if row.levels is None:
        return "its own" if row.gate else "-"
    verdict = getattr(row.levels, level)
    return verdict.value if verdict is not None else "note"


def _tests(tests: list[str]) -> str:
    return ", ".join(f"`{t.split('/')[-1]}`" for t in tests) or "none marked"


def defences_table() -> str:
    proved = proofs()
    lines = ["| check | enforces | holds on | attack tests (`proves`) | switch (off: the attack is accepted) |",
             "|---|---|---|---|---|"]
    for row in (r for r in ROWS if r.switch or r.tag in proved):
        holds = ", ".join(row.paths) + (f" ({row.needs})" if row.needs else "")
        switch = f"`{row.switch}`" + (f" ({row.measured})" if row.measured else "") if row.switch else "none"
        lines.append(f"| `[{row.tag.value}]` {_cell(row.doc)} | {_cell(row.enforces)} | {holds} | "
                     f"{_tests(proved.get(row.tag, []))} | {switch} |")
    return "\n".join(lines)


def verdicts_table() -> str:
    lines = [f"Gates in decision order: {', '.join(f'`{g}`' for g in gate_order())}.", "",
             "| tag | gate | strict | default | off | what it looks at |", "|---|---|---|---|---|---|"]
    for row in ROWS:
        tag = f"`[{row.tag.value}]`" if row.tag is not Check.NONE else "(none)"
        lines.append(f"| {tag} | {f'`{row.gate}`' if row.gate else 'gathered' if row.levels else 'containment'} | "
                     f"{_verdict(row, 'strict')} | {_verdict(row, 'default')} | {_verdict(row, 'off')} | "
                     f"{_cell(row.doc)} |")
    return "\n".join(lines)


TABLES = {"defences": defences_table, "verdicts": verdicts_table}


def rendered(name: str) -> str:
    """The doc with its generated block replaced by what the registry says now."""
    text = DOCS[name].read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return f"{text[:start]}\n{TABLES[name]()}\n{text[end:]}"


def main(argv: list[str]) -> int:
    stale = [name for name in DOCS if rendered(name) != DOCS[name].read_text()]
    if "--write" in argv:
        for name in stale:
            DOCS[name].write_text(rendered(name))
    print("\n".join(f"{'wrote' if '--write' in argv else 'stale'}: {DOCS[n].relative_to(REPO)}" for n in stale))
    return 1 if stale and "--write" not in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
