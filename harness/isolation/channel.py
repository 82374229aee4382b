"""JSON lines between the parent and a child over two pipes. The child's side is plain blocking I/O; the
parent's side waits with a deadline and never trusts what it reads (a malformed line is the child's failure).
What the lines say, one type per command and per reply, is harness/isolation/protocol.py."""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any


class ChannelClosed(Exception):
    """The other side went away (the child died or closed its end)."""


class ChildEnd:
    """The child's end: read commands, write replies. Used only inside the child."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.reader = os.fdopen(read_fd, "rb", buffering=0)
        self.write_fd = write_fd
        self.pending = b""

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data):]

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self.pending:
            chunk = os.read(self.reader.fileno(), 1 << 16)
            if not chunk:
                raise ChannelClosed("the parent closed the channel")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)


class ParentEnd:
    """The parent's end: `send` a command, `receive` the next message before a deadline (monotonic seconds)."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd = write_fd
        self.read_fd = read_fd
        self.pending = b""

    def send(self, message: dict[str, Any]) -> None:
        self.send_encoded(self.encode(message))

    @staticmethod
    def encode(message: dict[str, Any]) -> bytes:
        """One message as its line on the wire (encoded ahead, a timed command costs the clock only its write)."""
        return (json.dumps(message) + "\n").encode()

    def send_encoded(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.write_fd, data):]
        except OSError as exc:  # BrokenPipe: the child is gone
            raise ChannelClosed(str(exc)) from None

    def ready(self, timeout_s: float) -> bool:
        """A complete line is buffered, or data arrived within `timeout_s`."""
        if b"\n" in self.pending:
            return True
        readable, _, _ = select.select([self.read_fd], [], [], max(timeout_s, 0.0))
        if not readable:
            return False
        chunk = os.read(self.read_fd, 1 << 16)
        if not chunk:
            raise ChannelClosed("the child closed the channel")
        self.pending += chunk
        return b"\n" in self.pending

    def take(self) -> dict[str, Any]:
        line, _, self.pending = self.pending.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChannelClosed(f"the child wrote a malformed message: {line[:200]!r}") from None
        if not isinstance(message, dict):
            raise ChannelClosed("the child wrote a message that is not an object")
        return message

    def receive_until(self, deadline: float) -> dict[str, Any] | None:
        """The next message, or None at the deadline (a timed wait: no polling between bytes)."""
        while not self.ready(deadline - time.monotonic()):
            if time.monotonic() >= deadline:
                return None
        return self.take()

    def close(self) -> None:
        """Idempotent: a second close must never hit a descriptor number another thread has reused."""
        for fd in (self.write_fd, self.read_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.write_fd = self.read_fd = -1
