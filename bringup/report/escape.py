"""Text from nodes made safe for each output it reaches: one function per output.

Node names, GPU names, serials, VBIOS versions, kernel lines and probe messages are
whatever a node (or whoever controls it) sent. None of them may act in an output: no
terminal escape, no markup, no broken document. HTML is escaped by Jinja2's autoescape;
the rest is here:

    printable(text)   control characters removed (ESC, BEL, NUL, CR, C1 codes, Unicode
                      line separators, bidi overrides, lone surrogates); newlines kept,
                      a tab made a space: for consoles and plots
    one_line(text)    printable, on one line
    markdown(text)    one line, with `\\`, `&`, `<`, `>`, `|`, `[` and `]` escaped
    xml(text)         printable, and only the characters XML 1.0 allows
"""

from __future__ import annotations

import functools
import re

# C0 controls but tab and newline, DEL, the C1 controls (a terminal reads 0x9b as CSI),
# the Unicode line separators, and the bidi controls that make text read otherwise than it is.
_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff]"  # and lone surrogates: a path's undecodable bytes, no text anywhere
)
# What XML 1.0 forbids beyond that: lone surrogates and the non-characters U+FFFE/U+FFFF.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
# A report escapes the same short texts again and again (checks, statuses, actions, most
# messages, the units): each function keeps its answers for the most recent of them, a
# few MB at most whatever the nodes sent.
CACHED_CHARS = 256
CACHED_TEXTS = 4096

_MARKDOWN = {
    "\\": "\\\\",
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "|": "\\|",  # a cell of a GFM table ends at an unescaped pipe
    "[": "\\[",  # no link or image made of node text
    "]": "\\]",
}
# One character at a time, never the result again: str.translate does what a regex's
# substitution did, in C (a report of a thousand nodes escapes 340,000 fields).
_MARKDOWN_TABLE = str.maketrans({**_MARKDOWN, "\n": " "})


def printable(text: object) -> str:
    """The text without control characters; newlines kept, a tab made one space."""
    if type(text) is str and len(text) <= CACHED_CHARS:
        return _printable_text(text)
    return _CONTROL.sub("", str(text).replace("\t", " "))


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _printable_text(text: str) -> str:
    return _CONTROL.sub("", text.replace("\t", " "))


def one_line(text: object) -> str:
    """Printable text on one line: runs of whitespace (newlines too) made one space."""
    return " ".join(printable(text).split())


def markdown(text: object) -> str:
    """Text that stays text in Markdown: one line, markup characters escaped."""
    if type(text) is str and len(text) <= CACHED_CHARS:
        return _markdown_text(text)
    return printable(text).translate(_MARKDOWN_TABLE)


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _markdown_text(text: str) -> str:
    return printable(text).translate(_MARKDOWN_TABLE)


def xml(text: object) -> str:
    """Text every XML 1.0 parser reads: printable, no surrogate or non-character."""
    if type(text) is str and len(text) <= CACHED_CHARS:
        return _xml_text(text)
    return _NOT_XML.sub("", printable(text))


@functools.lru_cache(maxsize=CACHED_TEXTS)
def _xml_text(text: str) -> str:
    return _NOT_XML.sub("", printable(text))
