"""The envelope's ghost decides (issue 44, family 3): where the knock-out at another size (a batch of one) finds
forward right with every kernel function poisoned, the kernel does not compute the answers there, and a forward
that recognised the knock-out at the problem's own shape is credited nothing. Before, it was an `[envelope]` note
beside an accepted 50x. A kernel never called at a size (a guard falling back to PyTorch) stays a note."""

from __future__ import annotations

from harness.records import Verdict
from harness.shipping.envelope import Envelope, VariantResult, envelope_ghost

_KNOCKED_OUT = ("[ghost-kernel] with every function of the candidate's extension poisoned on a timed call, forward() "
                "still returned the right answer: the kernel does not compute the measured output")
_NEVER_CALLED = ("[ghost-kernel] the candidate's kernel functions were never called during the timed calls: what was "
                 "timed is some other code path")


def _envelope(*reasons: str) -> Envelope:
    variants = [VariantResult(label="batch of one", sizes={"batch_size": 1}, verdict=Verdict.REJECTED, reason=r)
                for r in reasons]
    return Envelope(sizes={"batch_size": 16}, variants=[
        VariantResult(label="odd sizes", sizes={"batch_size": 17}, verdict=Verdict.ACCEPTED), *variants])


def test_a_knocked_out_ghost_at_another_size_decides() -> None:
    finding = envelope_ghost(_envelope(_KNOCKED_OUT))
    assert finding is not None and finding.verdict is Verdict.REJECTED and finding.check == "ghost-kernel"
    assert "batch_size=1 (batch of one)" in finding.message


def test_a_fallback_path_at_another_size_stays_a_note() -> None:
    """The control: a guard that calls PyTorch at sizes its kernel does not handle is a deployable kernel."""
    assert envelope_ghost(_envelope(_NEVER_CALLED)) is None
    assert envelope_ghost(_envelope()) is None
    assert _envelope(_NEVER_CALLED).finding is not None  # the [envelope] note still names the size
