"""``RemoteSurface`` is ``MemorySurface`` across a process boundary: same API, same answers.

Here the boundary is the wire format itself (every request and reply goes through ``json``
as it would through a pipe) with a real ``MemorySurface`` answering on the other side; the
kernel tests run the same surface through the worker and the reader processes.
"""

from __future__ import annotations

import inspect
import itertools
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrollctx.errors import IntegrityError, MissingDependency, QueryError
from scrollctx.surface import Budgets, MemorySurface, RemoteSurface, ResultRows, open_surface
from scrollctx.surface._codec import Opaque, dumps, from_wire, to_wire
from scrollctx.surface._filters import Binding
from scrollctx.surface._remote import error_reply, rebuild_error, run_call


def _wire(value: Any) -> Any:
    return from_wire(json.loads(json.dumps(to_wire(value))))


def _same_types(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return all(_same_types(k, k) for k in a) and all(_same_types(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    return True


VALUES = [
    None, True, False, 0, -5, 2**70, 1.5, -0.0, float("inf"), "text", "\ud800 lone", "$15 off",
    b"\x00\xff", bytearray(b"ab"), (1, (2, "x")), [1, [2, (3,)]], {"a": 1}, {"$b": 1},
    {1: "a", (1, 2): "t", None: b"n"}, {1, 2}, frozenset({3}), date(2024, 3, 15),
    datetime(2024, 3, 15, 1, 2, 3, 456789, tzinfo=UTC), time(1, 2, 3),
    {"rows": [{"$opaque": "not a tag when it is data"}]}, (), [], {},
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_values_cross_the_wire_unchanged_with_their_types(value: Any) -> None:
    back = _wire(value)
    assert back == value and _same_types(back, value)


def test_nan_and_values_the_wire_cannot_carry() -> None:
    assert math.isnan(_wire(float("nan")))

    class Thing:
        def __repr__(self) -> str:
            return "<Thing 7>"

    back = _wire([Thing()])[0]
    assert isinstance(back, Opaque) and repr(back) == "<Thing 7>" and str(back) == "<Thing 7>"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(_JSON)
def test_decoding_untrusted_json_never_raises(data: Any) -> None:
    from_wire(data)
    from_wire({"$tuple": data})
    from_wire({"$dict": data})
    from_wire({"$bytes": data})


def test_rows_take_the_plain_path_and_blobs_the_tagged_one() -> None:
    assert dumps([{"seq": 1, "metadata": {"$x": 1}}]) == ('[{"seq":1,"metadata":{"$x":1}}]', False)
    text, tagged = dumps([{"b": b"\x01"}])
    assert tagged and from_wire(json.loads(text)) == [{"b": b"\x01"}]


# -- the API ----------------------------------------------------------------------------------


def _answered(surface: MemorySurface, message: dict[str, Any], limit: int) -> dict[str, Any]:
    # What the memory reader does with one request: run it, write the reply (as bytes).
    answer = run_call(surface, message, memory_hint="(test)")
    reply: dict[str, Any] = json.loads(answer.reply(message.get("call"), limit))
    return reply


def _over_the_wire(surface: MemorySurface, limit: int = 10**8) -> Callable[..., dict[str, Any]]:
    calls = itertools.count(1)

    def transport(request: dict[str, Any]) -> dict[str, Any]:
        message = json.loads(json.dumps({"op": "ms", "call": next(calls), **request}))
        return _answered(surface, message, limit)

    return transport


@pytest.fixture
def pair(store_path: Path) -> Iterator[tuple[MemorySurface, RemoteSurface]]:
    """The same binding twice: in-process, and remote over a second surface of the store."""
    local = open_surface(store_path, session_id="s1", task_id="t1")
    server = open_surface(store_path, session_id="s1", task_id="t1")
    remote = RemoteSurface(_over_the_wire(server), Binding("s1", "t1"), Budgets())
    yield local, remote
    local.close()
    server.close()


def test_the_remote_api_is_memory_surface_s_own(pair: tuple[MemorySurface, RemoteSurface]) -> None:
    local, remote = pair
    public = sorted(name for name in dir(MemorySurface) if not name.startswith("_"))
    assert sorted(name for name in dir(remote) if not name.startswith("_")) == public
    for name in public:
        original, derived = getattr(MemorySurface, name), getattr(type(remote), name)
        assert inspect.getdoc(derived) == inspect.getdoc(original), name
        if callable(original):
            assert inspect.signature(derived) == inspect.signature(original), name
    assert remote.help() == local.help()
    assert repr(remote) == repr(local)
    assert (remote.session_id, remote.task_id, remote.budgets) == ("s1", "t1", local.budgets)
    assert remote.has_fts5 is local.has_fts5


def _hits(ms: Any) -> Any:
    return ms.search("vendor", k=3)


CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("search", lambda ms: ms.search("pamela vendor", k=3)),
    (
        "search-filters",
        lambda ms: ms.search(
            "car",
            kind=["conversation"],
            role=("user",),
            seq_range=(1, 10**30),
            step_range=(None, 2),
            created_from=date(2024, 1, 1),
            snippet=False,
            chars=None,
            all_agents=True,
        ),
    ),  # fmt: skip
    ("search-k0", lambda ms: ms.search("x", k=0)),
    ("search-k-str", lambda ms: ms.search("x", k="5")),
    ("search-k-huge", lambda ms: ms.search("tolls", k=10**30)),
    ("search-kind-int", lambda ms: ms.search("x", kind=5)),
    ("search-gen-kind", lambda ms: ms.search("x", kind=(k for k in ["user"]))),
    ("search-scope", lambda ms: ms.search("x", scope="bogus")),
    ("search-range", lambda ms: ms.search("x", seq_range=(1, "a"))),
    ("search-range-len", lambda ms: ms.search("x", seq_range=[1])),
    ("search-date", lambda ms: ms.search("x", created_from="junk")),
    ("search-chars", lambda ms: ms.search("x", chars=True)),
    ("search-query-int", lambda ms: ms.search(12345)),
    ("search-bogus-kw", lambda ms: ms.search("x", bogus=1)),
    ("search-no-query", lambda ms: ms.search()),
    ("search-positional", lambda ms: ms.search("x", 1, "user")),
    ("search-operators", lambda ms: ms.search('pamela OR "std::vector" NOT car tem*')),
    ("expand", lambda ms: ms.expand([1, 2, 999])),
    ("expand-hits", lambda ms: ms.expand(_hits(ms))),
    ("expand-gen", lambda ms: ms.expand(s for s in (3, 1))),
    ("expand-span", lambda ms: ms.expand(4, 2)),
    ("expand-huge-span", lambda ms: ms.expand(1, 10**30)),
    ("expand-str", lambda ms: ms.expand("abc")),
    ("expand-mixed", lambda ms: ms.expand([1, "a"])),
    ("expand-row", lambda ms: ms.expand({"seq": 2})),
    ("expand-bad-span", lambda ms: ms.expand("a", 2)),
    ("expand-float", lambda ms: ms.expand(1.5)),
    ("expand-bool", lambda ms: ms.expand(True)),
    ("expand-payload", lambda ms: ms.expand(12)),
    (
        "sql",
        lambda ms: ms.sql_query(
            "SELECT seq, content FROM hist.conversation_history WHERE seq < ? ORDER BY seq", (4,)
        ),
    ),  # fmt: skip
    (
        "sql-blob",
        lambda ms: ms.sql_query(
            "SELECT zeroblob(3) AS z, x'00ff' AS b, 1e999 AS inf, NULL AS n, 2.5 AS f"
        ),
    ),  # fmt: skip
    ("sql-named", lambda ms: ms.sql_query("SELECT :a AS a", {"a": "x"})),
    ("sql-gen", lambda ms: ms.sql_query("SELECT ? AS a, ? AS b", (p for p in (1, 2)))),
    ("sql-range", lambda ms: ms.sql_query("SELECT ? AS a", range(7, 8))),
    ("sql-params-str", lambda ms: ms.sql_query("SELECT ?", "x")),
    ("sql-write", lambda ms: ms.sql_query("DELETE FROM hist.conversation_history")),
    ("sql-empty", lambda ms: ms.sql_query("")),
    ("sql-int", lambda ms: ms.sql_query(5)),
    ("sql-missing", lambda ms: ms.sql_query("SELECT * FROM nope")),
    ("sql-two", lambda ms: ms.sql_query("SELECT 1; SELECT 2")),
    ("sql-overflow", lambda ms: ms.sql_query("SELECT ?", (10**30,))),
    ("sql-dollar", lambda ms: ms.sql_query("SELECT 1 AS \"$b\", json_object('$x', 2) AS j")),
    (
        "sql-cap",
        lambda ms: ms.sql_query(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
            "FROM c LIMIT 1500) SELECT x FROM c"
        ),
    ),  # fmt: skip
    ("sql-pragma", lambda ms: ms.sql_query("PRAGMA table_info(conversation_history)")),
    ("sessions", lambda ms: ms.sessions(all_agents=True)),
    ("session", lambda ms: ms.session()),
    ("session-other", lambda ms: ms.session("s2", after_seq=7)),
    ("session-after", lambda ms: ms.session(after_seq="x")),
    ("session-huge", lambda ms: ms.session(after_seq=10**30)),
    ("recall", lambda ms: ms.recall_tool("nope")),
    ("recall-int", lambda ms: ms.recall_tool(5)),
    ("index", lambda ms: ms.index()),
    ("days", lambda ms: ms.days_between("2024-01-01", datetime(2024, 2, 1), inclusive=True)),
    ("days-bad", lambda ms: ms.days_between("x", "y")),
]


def _outcome(call: Callable[[Any], Any], ms: Any) -> tuple[Any, ...]:
    try:
        value = call(ms)
    except Exception as exc:  # noqa: BLE001 - the outcome is compared, whatever it is
        cause = exc.__cause__
        attrs = {k: v for k, v in vars(exc).items() if not k.startswith("_")}
        shown = (type(cause).__name__, str(cause)) if cause else None
        return ("raised", type(exc), _without_addresses(str(exc)), attrs, shown)
    flags = (value.notes, value.partial, value.truncated) if isinstance(value, ResultRows) else ()
    return ("returned", type(value), value, flags, ms.drain_notes())


def _without_addresses(text: str) -> str:
    # A message that shows an argument's repr shows its address: the same object on both
    # sides only when the allocator happens to reuse the slot.
    return re.sub(r" at 0x[0-9a-f]+>", " at 0x…>", text)


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_every_call_answers_as_in_process(
    pair: tuple[MemorySurface, RemoteSurface], name: str, call: Callable[[Any], Any]
) -> None:
    local, remote = pair
    assert _outcome(call, remote) == _outcome(call, local)


def test_errors_are_rebuilt_as_their_class_with_their_attributes() -> None:
    try:
        raise QueryError("bad query", query="SELECT x") from sqlite3.OperationalError("no x")
    except QueryError as exc:
        rebuilt = rebuild_error(json.loads(error_reply(1, exc))["error"])
    assert isinstance(rebuilt, QueryError) and str(rebuilt) == "bad query"
    assert rebuilt.query == "SELECT x"
    assert isinstance(rebuilt.__cause__, sqlite3.OperationalError)
    broken = rebuild_error({"module": "os", "type": "system", "args": ["rm -rf /"]})
    assert type(broken) is RuntimeError
    torn = rebuild_error({"module": "builtins", "type": "UnicodeEncodeError", "args": ["x"]})
    assert isinstance(torn, UnicodeError)
    described = {"module": "scrollctx.errors", "type": "IntegrityError", "args": ["damaged"]}
    corrupt = rebuild_error({**described, "attrs": {"path": "/s", "__class__": 1}})
    assert isinstance(corrupt, IntegrityError) and corrupt.path == "/s"
    missing = MissingDependency("onnxruntime", "semantic")
    rebuilt_missing = rebuild_error(json.loads(error_reply(1, missing))["error"])
    assert type(rebuilt_missing) is MissingDependency and str(rebuilt_missing) == str(missing)
    assert (rebuilt_missing.package, rebuilt_missing.extra) == ("onnxruntime", "semantic")


def test_a_reply_over_the_limit_becomes_an_error_saying_so(store_path: Path) -> None:
    with open_surface(store_path) as server:
        remote = RemoteSurface(_over_the_wire(server, limit=20_000), Binding(), Budgets())
        with pytest.raises(QueryError, match="over the 20,000-byte limit of one ms call"):
            remote.expand(12)  # the externalized payload: about 24 kB
        assert len(remote.expand(1)) == 1


@given(st.dictionaries(st.text(max_size=8), _JSON, max_size=4))
def test_answering_any_request_never_raises(store_path: Path, message: dict[str, Any]) -> None:
    with open_surface(store_path) as server:
        reply = _answered(server, message, 10**6)
    assert reply["op"] == "ms_result" and isinstance(reply["ok"], bool)
    if not reply["ok"]:
        assert isinstance(rebuild_error(reply["error"]), Exception)
