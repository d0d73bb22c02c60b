"""The controller's line buffer for what a node sends: whole lines out, the unfinished one
capped, a line past the cap a TransportError naming the node."""

from __future__ import annotations

import pytest

from bringup.fleet.transport import MAX_LINE_BYTES, LineBuffer, TransportError


def test_lines_split_across_chunks_come_out_whole() -> None:
    lines = LineBuffer("n1")
    assert lines.feed(b'{"probe": "a"}\n{"pro') == [b'{"probe": "a"}']
    assert lines.feed(b'be": ') == []
    assert lines.feed(b'"b"}\n\n  \n{"probe": "c"}\n') == [b'{"probe": "b"}', b'{"probe": "c"}']


def test_the_cap_is_64_mib_by_default() -> None:
    assert MAX_LINE_BYTES == 64 * 1024 * 1024
    assert LineBuffer("n1").limit == MAX_LINE_BYTES
    lines = LineBuffer("n1", limit=2 * 1024 * 1024)
    with pytest.raises(TransportError, match=r"^n1 sent a line of over 2 MiB without its end"):
        lines.feed(b"x" * (2 * 1024 * 1024 + 1))


def test_an_unfinished_line_over_the_cap_names_the_node() -> None:
    lines = LineBuffer("gpu-017", limit=1024)
    lines.feed(b"x" * 1000)
    with pytest.raises(TransportError) as info:
        lines.feed(b"y" * 100)
    assert str(info.value) == (
        "gpu-017 sent a line of over 1024 bytes without its end (node side gone wrong?); "
        "stopped reading it"
    )


def test_a_finished_line_resets_the_count() -> None:
    lines = LineBuffer("n1", limit=10)
    for _ in range(5):
        assert lines.feed(b"12345678\n") == [b"12345678"]
    assert lines.feed(b"123456789") == []
    with pytest.raises(TransportError):
        lines.feed(b"01")
