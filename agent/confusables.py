"""Characters a reader takes for `<` or `>`, which NFKC does not fold to them: Unicode's confusables for U+003C and
U+003E (confusables.txt, Unicode Security Mechanisms, UTS #39) and the angle brackets and quotation marks drawn the
same way. `inert` (agent/prompts.py) writes each as a numeric character reference, so candidate text can spell no
look-alike of a fence's marker. Data, not code: add a row for a new look-alike."""

from __future__ import annotations

# (code point, name): every row is written as `&#xHEX;` in a prompt
LOOK_ALIKES: tuple[tuple[int, str], ...] = (
    (0x00AB, "LEFT-POINTING DOUBLE ANGLE QUOTATION MARK"),
    (0x00BB, "RIGHT-POINTING DOUBLE ANGLE QUOTATION MARK"),
    (0x02C2, "MODIFIER LETTER LEFT ARROWHEAD"),  # confusable with <
    (0x02C3, "MODIFIER LETTER RIGHT ARROWHEAD"),  # confusable with >
    (0x1433, "CANADIAN SYLLABICS PO"),  # confusable with >
    (0x1438, "CANADIAN SYLLABICS PA"),  # confusable with <
    (0x16B2, "RUNIC LETTER KAUNA"),  # confusable with <
    (0x2039, "SINGLE LEFT-POINTING ANGLE QUOTATION MARK"),  # confusable with <
    (0x203A, "SINGLE RIGHT-POINTING ANGLE QUOTATION MARK"),  # confusable with >
    (0x226E, "NOT LESS-THAN"),  # what NFKC composes `<` and U+0338 into
    (0x226F, "NOT GREATER-THAN"),
    (0x2329, "LEFT-POINTING ANGLE BRACKET"),  # NFKC: U+3008
    (0x232A, "RIGHT-POINTING ANGLE BRACKET"),  # NFKC: U+3009
    (0x276C, "MEDIUM LEFT-POINTING ANGLE BRACKET ORNAMENT"),
    (0x276D, "MEDIUM RIGHT-POINTING ANGLE BRACKET ORNAMENT"),
    (0x276E, "HEAVY LEFT-POINTING ANGLE QUOTATION MARK ORNAMENT"),  # confusable with <
    (0x276F, "HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT"),  # confusable with >
    (0x2770, "HEAVY LEFT-POINTING ANGLE BRACKET ORNAMENT"),
    (0x2771, "HEAVY RIGHT-POINTING ANGLE BRACKET ORNAMENT"),
    (0x27E8, "MATHEMATICAL LEFT ANGLE BRACKET"),
    (0x27E9, "MATHEMATICAL RIGHT ANGLE BRACKET"),
    (0x27EA, "MATHEMATICAL LEFT DOUBLE ANGLE BRACKET"),
    (0x27EB, "MATHEMATICAL RIGHT DOUBLE ANGLE BRACKET"),
    (0x29FC, "LEFT-POINTING CURVED ANGLE BRACKET"),
    (0x29FD, "RIGHT-POINTING CURVED ANGLE BRACKET"),
    (0x3008, "LEFT ANGLE BRACKET"),  # NFKC's image of U+2329 and U+FE3F
    (0x3009, "RIGHT ANGLE BRACKET"),
    (0x300A, "LEFT DOUBLE ANGLE BRACKET"),
    (0x300B, "RIGHT DOUBLE ANGLE BRACKET"),
    (0x16F3F, "MIAO LETTER ARCHAIC ZZA"),  # confusable with >
    (0x1D236, "GREEK INSTRUMENTAL NOTATION SYMBOL-40"),  # confusable with <
    (0x1D237, "GREEK INSTRUMENTAL NOTATION SYMBOL-42"),  # confusable with >
)

ESCAPES: dict[int, str] = {point: f"&#x{point:X};" for point, _ in LOOK_ALIKES}  # for str.translate
