"""Text from trainers made safe to print on a terminal.

A trainer's log line may hold any bytes: ESC starts sequences that move the cursor, recolour or
retitle the terminal and, on some, answer back as keyboard input; CR rewrites the line before it,
so a line can hide what it follows; NUL and bidirectional overrides make text read differently
from what it is. Printed for a person, these are shown the way `cat -v` shows them (`^[`, `^M`,
`^@`, `^?`) and other invisible controls as `\\x9b` / `\\u202e`; tab and, where a message may span
lines, newline are kept. Machine-readable output (`--format json`) keeps the text exact.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def for_terminal(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with every control character but tab (and newline when asked) made visible."""
    if keep_newlines:
        return "\n".join(_CONTROL.sub(_shown, line) for line in text.split("\n"))
    return _CONTROL.sub(_shown, text.replace("\n", "^J"))
