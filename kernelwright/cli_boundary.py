"""Where a command meets the user: how it is registered, its one error boundary, its progress lines and its exit
status. A user's mistake is one line and exit status 2 (never a traceback); Ctrl-C is one line and 130."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
import typing
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import typer
from rich.console import Console
from rich.markup import escape

stderr = Console(stderr=True, soft_wrap=True)  # long lines stay whole in log files

EXIT_NOT_ACCEPTED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def command(group: typer.Typer, name: str, interrupted: str = "interrupted") -> Callable[[Callable[..., Any]],
                                                                                          Callable[..., Any]]:
    """Register `function` as `name` behind the error boundary. A parameter typed with an options group (a
    dataclass of option types, cli_options.py) reaches typer as the group's options and the function as one
    group object. `interrupted`: the line Ctrl-C prints when nothing more telling is known."""

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        parameters, groups = _spread(function)

        def call(**values: Any) -> Any:
            for parameter, (kind, fields) in groups.items():
                values[parameter] = kind(**{field: values.pop(field) for field in fields})
            try:
                return function(**values)
            except KeyboardInterrupt:
                raise _stop(interrupted) from None
            except Exception as exc:  # noqa: BLE001 - sorted below; anything else keeps its traceback
                if isinstance(exc, _user_errors()):
                    raise fail(str(exc)) from None
                message = _interruption(exc)
                if message is None:
                    raise
                raise _stop(message) from None

        call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        call.__annotations__ = {p.name: p.annotation for p in parameters}
        call.__name__, call.__doc__, call.__module__ = function.__name__, function.__doc__, function.__module__
        group.command(name)(call)
        return function

    return register


def _spread(function: Callable[..., Any]) -> tuple[list[inspect.Parameter], dict[str, tuple[type, list[str]]]]:
    """The parameters typer reads (each group's options in the group's place, all keyword-only), and per group
    parameter its dataclass and field names."""
    hints = typing.get_type_hints(function, include_extras=True)
    parameters: list[inspect.Parameter] = []
    groups: dict[str, tuple[type, list[str]]] = {}
    for parameter in inspect.signature(function).parameters.values():
        kind = hints[parameter.name]
        if not dataclasses.is_dataclass(kind):
            parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=kind))
            continue
        fields = typing.get_type_hints(kind, include_extras=True)
        groups[parameter.name] = (kind, [field.name for field in dataclasses.fields(kind)])
        parameters += [inspect.Parameter(field.name, inspect.Parameter.KEYWORD_ONLY, default=field.default,
                                         annotation=fields[field.name]) for field in dataclasses.fields(kind)]
    return parameters, groups


_USER_ERRORS = (("kernelwright.errors", "UsageError"), ("kernelbench.problem", "ProblemError"),
                ("harness.device", "DeviceError"), ("store.db", "StoreError"), ("agent.recorder", "ResumeError"))


def _loaded(names: tuple[tuple[str, str], ...]) -> tuple[type[Exception], ...]:
    """The exception classes among `names` whose modules are loaded: an exception cannot be an instance of a class
    never imported, and importing one here (the store's pulls in SQLAlchemy: seconds) would delay a usage error."""
    return tuple(getattr(sys.modules[module], name) for module, name in names if module in sys.modules)


def _user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean a user's mistake."""
    return _loaded(_USER_ERRORS)


def _interruption(exc: Exception) -> str | None:
    """What a Ctrl-C that a service caught and described means to the user, or None for any other error."""
    interrupted = _loaded((("kernelwright.interrupts", "Interrupted"),))
    if interrupted and isinstance(exc, interrupted):
        return exc.message  # type: ignore[attr-defined]
    gate = _loaded((("kernelwright.gate_service", "GateInterrupted"),))
    if gate and isinstance(exc, gate):
        return (f"interrupted: the gate verified {exc.done} of {exc.total} kernels (those are stored); it neither "
                "passed nor failed")
    return None


def fail(message: str) -> typer.Exit:
    stderr.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(EXIT_USAGE)


def _stop(message: str) -> typer.Exit:
    stderr.print(message, markup=False)
    return typer.Exit(EXIT_INTERRUPTED)


def exit_unless(ok: bool) -> None:
    """Exit status 1 when the command's result does not hold (not accepted, a gate that failed)."""
    if not ok:
        raise typer.Exit(EXIT_NOT_ACCEPTED)


@contextmanager
def progress(first: str) -> Iterator[Callable[[str], None]]:
    """A spinner in a terminal; elsewhere (CI logs, files) one timestamped line per step."""
    if stderr.is_terminal:
        with stderr.status(first) as status:
            yield lambda message: status.update(message)
        return
    started = time.monotonic()
    yield lambda message: stderr.print(f"[{time.monotonic() - started:6.1f} s] {message}", markup=False)


def lines() -> Callable[[str], None]:
    """Progress of long commands, one line per step (kept whole in log files)."""
    return lambda message: stderr.print(message, markup=False)


def note(message: str) -> None:
    """One line on stderr (never rich markup: bracketed tags stay visible)."""
    stderr.print(message, markup=False)
