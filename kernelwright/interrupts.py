"""Ctrl-C for long commands: kill what is in flight at once, let the caller mark its run, say how to resume."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from harness.isolation.session import kill_live_processes


class Interrupted(Exception):
    """Ctrl-C, caught by a service that knows what was finished: `message` is the one line the user reads."""

    @property
    def message(self) -> str:
        return str(self)


class RunInterrupted(Interrupted):
    """Ctrl-C: the run is marked `interrupted` and can be resumed with `resume_command`."""

    def __init__(self, run_id: str, resume_command: str) -> None:
        super().__init__(f"interrupted: run {run_id} is marked `interrupted`; continue it with\n  {resume_command}")
        self.run_id = run_id
        self.resume_command = resume_command


@contextmanager
def stop_on_ctrl_c(on_stop: Callable[[], None]) -> Iterator[None]:
    """On Ctrl-C, call `on_stop` (so nothing reported afterwards is recorded), kill the builds and children in
    flight (evaluations in worker threads would otherwise finish first, for up to a minute), and raise
    KeyboardInterrupt in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        on_stop()
        kill_live_processes(for_good=True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
