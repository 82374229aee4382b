"""The kernel switch in the child (harness/compilation/build_cache.py): counting calls of the candidate's own functions,
and CUDA graphs of them, checked with a stand-in graph class (no GPU needed)."""

from __future__ import annotations

import types
from typing import Any

from harness.compilation.build_cache import KernelSwitch


class FakeGraph:
    """CUDAGraph's capture/replay surface: replay re-runs what was captured."""

    def __init__(self) -> None:
        self.captured: list[Any] = []
        self.capturing = False
        self.replays = 0

    def capture_begin(self) -> None:
        self.capturing = True

    def capture_end(self) -> None:
        self.capturing = False

    def replay(self) -> None:
        self.replays += 1


def _switched() -> tuple[KernelSwitch, Any, type]:
    switch = KernelSwitch()
    graph_class = type("Graph", (FakeGraph,), {})
    switch.watch_graphs(graph_class)
    extension = switch.wrap(types.SimpleNamespace(__name__="ext", kernel=lambda x: x))
    return switch, extension, graph_class


def test_a_graph_of_the_candidates_kernels_counts_them_at_every_replay() -> None:
    switch, extension, graph_class = _switched()
    graph = graph_class()
    graph.capture_begin()
    extension.kernel(1.0)
    extension.kernel(2.0)
    graph.capture_end()
    before = switch.calls
    graph.replay()
    graph.replay()
    assert switch.calls - before == 4 and graph.replays == 2


def test_a_graph_of_torch_ops_alone_counts_nothing() -> None:
    switch, _extension, graph_class = _switched()
    graph = graph_class()
    graph.capture_begin()
    graph.capture_end()
    graph.replay()
    assert switch.calls == 0 and graph.replays == 1


def test_poisoned_kernels_do_not_replay_in_the_knock_out_run() -> None:
    """The knock-out: the candidate's own graph produces nothing (its output keeps stale values, which fail);
    a graph without its kernels still runs, so a forward that never depended on them still reads as a ghost."""
    switch, extension, graph_class = _switched()
    own, torch_only = graph_class(), graph_class()
    own.capture_begin()
    extension.kernel(1.0)
    own.capture_end()
    torch_only.capture_begin()
    torch_only.capture_end()
    switch.poison = True
    own.replay()
    torch_only.replay()
    assert own.replays == 0 and torch_only.replays == 1
