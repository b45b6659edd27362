"""Text that dlperf did not write (a workload's messages, a framework version, a host name, a
warning, a path) as a terminal or a page may show it: its control characters escaped, never
acted on.

A stored string can hold an ESC sequence that clears the screen, moves the cursor or writes the
clipboard (OSC 52), a carriage return that overwrites the line before it, a C1 control, a line
or paragraph separator (U+2028, U+2029) or a bidirectional override that reorders what is shown.
`printable` shows each as an escape a reader recognises (``\\x1b``, ``\\r``, ``\\u2028``): the
text stays readable and nothing reaches the terminal as a control. The console (`dlperf.cli`
.render) passes everything it prints through it; the Markdown and HTML renderers through their
own escaping, which starts here.
"""

from __future__ import annotations

import re

C0 = "\x00-\x1f"  # ESC, CR, BEL, backspace...
OTHERS = (
    "\x7f-\x9f"  # DEL, C1 (CSI, OSC...)
    "\u2028\u2029"  # line and paragraph separators: a new line to some readers
    "\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidirectional marks, overrides and isolates
)
CONTROLS = C0 + OTHERS
# Halves of UTF-16 pairs: JSON may spell one alone ("\ud800") and Python reads it into a str,
# but it is no Unicode text, and no UTF-8 writer (SQLite, a terminal, a page, XML) takes it.
SURROGATES = "\ud800-\udfff"
SHORT = {"\r": "\\r", "\t": "\\t", "\n": "\\n"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in SHORT:
        return SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ALL = re.compile(f"[{CONTROLS}]")
_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{OTHERS}]")  # all but tab (0x09) and new line (0x0a)


def printable(text: str, keep_lines: bool = False) -> str:
    """`text` with every control character shown as an escape; `keep_lines`: new lines and
    tabs stay as they are (a multi-line message on a terminal)."""
    return (_LINES if keep_lines else _ALL).sub(_escape, text)


def escaped(chars: re.Pattern[str], text: str) -> str:
    """`text` with each character `chars` matches shown as `printable` shows a control
    (``\ud800``, ``\ufffe``): for what other writers refuse besides controls."""
    return chars.sub(_escape, text)


def printable_json(text: str) -> str:
    """JSON text whose strings may hold raw C1 controls, DEL or separators (JSON requires only
    C0 to be escaped) with those written as \\u escapes: the same JSON value, safe to show."""
    return _JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_JSON = re.compile(f"[{OTHERS}]")  # raw C0 is not valid JSON in a string; between tokens: \t \n


__all__ = ["escaped", "printable", "printable_json"]


def figure(value: float) -> str:
    """A measured value for a table: four significant digits, thousands grouped and never in
    exponent form (12,346 samples/s, not 1.235e+04)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
