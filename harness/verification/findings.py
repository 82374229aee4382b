"""A static finding: a stable check name, a message for people and the judge model, and its severity."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Finding:
    check: str  # a stable name: tests and the judge model key on it
    message: str
    line: int | None = None
    fatal: bool = True

    def render(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"[{self.check}] {self.message}{where}"
