"""The streaming array decoder agrees with json.loads at every chunk size and stays bounded."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrollctx.errors import FormatError
from scrollctx.ingest import iter_array, iter_jsonl, probe
from scrollctx.ingest._jsonstream import _ArrayStream

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=120, deadline=None)
@given(
    values=st.lists(json_values, max_size=8),
    chunk=st.integers(min_value=1, max_value=17),
    indent=st.sampled_from([None, 0, 2]),
)
def test_iter_array_matches_json_loads(
    tmp_path_factory: pytest.TempPathFactory, values: list[Any], chunk: int, indent: int | None
) -> None:
    path = tmp_path_factory.mktemp("arr") / "a.json"
    path.write_text(json.dumps(values, indent=indent, ensure_ascii=False), encoding="utf-8")
    assert list(iter_array(path, chunk_chars=chunk)) == json.loads(path.read_text("utf-8"))


def test_number_cut_at_a_chunk_edge_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text("[123456789, 42]", encoding="utf-8")
    assert list(iter_array(path, chunk_chars=4)) == [123456789, 42]


def test_buffer_stays_bounded_by_one_element() -> None:
    element = {"text": "x" * 200}
    stream = _ArrayStream(io.StringIO(json.dumps([element] * 500)), Path("mem.json"), 256)
    largest = 0
    for value in stream.elements():
        assert value == element
        largest = max(largest, len(stream.buf))
    assert largest < 4 * 256 + 2 * len(json.dumps(element))


def test_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([{"role": "user", "content": "hi"}]).encode())
    assert probe(path).shape == "array"
    assert list(iter_array(path)) == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[{"a": 1}, {"a": 2', "truncated"),
        ('[{"a": 1}, {"a": "unterminated', "truncated"),
        ('[{"a": 1},', "truncated"),
        ('[{"a": 1} {"a": 2}]', "expected ',' or ']'"),
        ('[{"a": 1}, {"a": nope}]', "not valid JSON"),
        ('[{"a": 1}] trailing', "extra data after the JSON array"),
    ],
)
def test_bad_arrays_raise_format_error_with_the_path(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=needle) as caught:
        list(iter_array(path, chunk_chars=3))
    assert str(path) in str(caught.value)
    assert caught.value.path == str(path)


def test_jsonl_reports_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n{"a": 2\n', encoding="utf-8")
    rows = iter_jsonl(path)
    assert next(rows) == {"a": 1}
    with pytest.raises(FormatError, match="line 3"):
        next(rows)


def test_probe_tells_shapes_apart(tmp_path: Path) -> None:
    (tmp_path / "o.json").write_text('{\n "messages": []\n}\n', encoding="utf-8")
    (tmp_path / "l.jsonl").write_text('{"a": 1}\n{"a": 2}\n', encoding="utf-8")
    (tmp_path / "a.json").write_text(' \n [ {"a": 1} ]', encoding="utf-8")
    assert probe(tmp_path / "o.json").shape == "object"
    assert probe(tmp_path / "l.jsonl").shape == "jsonl"
    assert probe(tmp_path / "a.json").first == {"a": 1}


@pytest.mark.parametrize("shape", ["jsonl", "array"])
def test_not_utf8_names_the_byte_and_line_far_into_the_file(tmp_path: Path, shape: str) -> None:
    lines = [
        json.dumps({"role": "user", "content": f"ligne {i} é" + "x" * 90}) for i in range(3000)
    ]
    good = ("\n".join(lines) if shape == "jsonl" else "[\n" + ",\n".join(lines)).encode("utf-8")
    bad = b'\n{"role": "user", "content": "caf\xe9"}' if shape == "jsonl" else b',\n"caf\xe9"]'
    path = tmp_path / f"late.{shape}"
    path.write_bytes(good + bad + b"\n")
    offset = len(good) + bad.index(b"\xe9")
    reader = iter_jsonl if shape == "jsonl" else iter_array
    with pytest.raises(FormatError) as caught:
        list(reader(path))
    line = 3001 if shape == "jsonl" else 3002
    assert f"is not UTF-8 text (invalid continuation byte at byte {offset}, line {line})" in str(
        caught.value
    )
