"""The frame layer on its own, over a real pipe: what its module docstring promises."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from scrollctx.errors import ProtocolError
from scrollctx.kernel._frames import (
    HEADER,
    FrameReader,
    as_views,
    consume,
    encode_frame,
    frame_parts,
    write_frame,
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    os.close(read_end)
    os.close(write_end)


def test_an_oversized_header_is_refused_before_its_body_arrives(pipe: tuple[int, int]) -> None:
    # Only the header is written: a reader that waited for the body would time out instead.
    read_end, write_end = pipe
    os.write(write_end, HEADER.pack(1025, 1))
    with pytest.raises(ProtocolError, match="frame of 1,025 bytes exceeds the 1,024-byte limit"):
        FrameReader(read_end, max_size=1024).read(time.monotonic() + 5, expect=1)


def test_a_header_for_another_request_is_refused_before_its_body_arrives(
    pipe: tuple[int, int],
) -> None:
    read_end, write_end = pipe
    os.write(write_end, HEADER.pack(10, 7))
    with pytest.raises(ProtocolError, match="request 7 arrived while request 3 was running"):
        FrameReader(read_end).read_body(time.monotonic() + 5, expect=3)


def test_two_frames_in_one_read_both_arrive_whole(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.write(write_end, encode_frame(1, {"a": 1}) + encode_frame(2, {"b": "two"}))
    reader = FrameReader(read_end)
    assert reader.read(time.monotonic() + 5, expect=1) == {"a": 1}
    assert reader.last_id == 1 and bytes(reader.last_body) == b'{"a":1}'
    assert reader.read(time.monotonic() + 5, expect=2) == {"b": "two"}
    assert reader.last_id == 2 and reader.last_size == len(b'{"b":"two"}')


def test_a_forwarded_body_is_the_one_read_under_a_new_header(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    write_frame(write_end, encode_frame(5, {"op": "ms", "call": 1}))
    reader = FrameReader(read_end)
    body = reader.read_body(time.monotonic() + 5, expect=5)
    # The reader's own buffer, handed over whole: not copied out of it.
    assert isinstance(body, bytearray) and body is reader.last_body
    write_frame(write_end, frame_parts(9, body or b""))
    assert reader.read(time.monotonic() + 5, expect=9) == {"op": "ms", "call": 1}


def test_consume_drops_written_bytes_across_pieces() -> None:
    views = as_views((b"abc", b"", b"defg"))
    assert [bytes(v) for v in views] == [b"abc", b"defg"]  # an empty piece is no view
    consume(views, 4)
    assert [bytes(v) for v in views] == [b"efg"]
    consume(views, 3)
    assert views == []


def test_peek_shows_a_whole_frame_and_leaves_it_to_be_read(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.set_blocking(read_end, False)
    reader = FrameReader(read_end)
    assert reader.peek() is None  # nothing has come: no wait
    frame = encode_frame(4, {"op": "ms", "call": 2})
    os.write(write_end, frame[:7])
    assert reader.peek() is None  # half a frame is not shown
    os.write(write_end, frame[7:])
    assert reader.peek() == (4, b'{"op":"ms","call":2}')
    assert reader.read(time.monotonic() + 5, expect=4) == {"op": "ms", "call": 2}


def test_peek_does_not_show_a_frame_over_the_limit(pipe: tuple[int, int]) -> None:
    read_end, write_end = pipe
    os.set_blocking(read_end, False)
    os.write(write_end, encode_frame(1, {"pad": "x" * 100}))
    reader = FrameReader(read_end, max_size=50)
    assert reader.peek() is None
    with pytest.raises(ProtocolError, match="exceeds the 50-byte limit"):
        reader.read(time.monotonic() + 5)
