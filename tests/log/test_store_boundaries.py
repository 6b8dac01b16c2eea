"""The Event Log at its edges: a dedup key repeated inside one batch, the payload threshold."""

from __future__ import annotations

from scrollctx.log import EventLog, Kind, NewEvent


def _event(content: str, key: str | None = None) -> NewEvent:
    return NewEvent(
        session_id="s", kind=Kind.CONVERSATION, role="user", content=content, dedup_key=key
    )


def test_a_dedup_key_repeated_inside_one_batch_is_appended_once(event_log: EventLog) -> None:
    seqs = event_log.append_many([_event("first", "k"), _event("other"), _event("again", "k")])
    assert seqs[0] == seqs[2] and seqs[1] != seqs[0]
    assert event_log.count() == 2
    assert event_log.get(seqs[0]).content == "first"
    assert event_log.append_many([_event("later", "k")]) == [seqs[0]]
    assert event_log.count() == 2


def test_content_of_exactly_the_threshold_stays_inline_one_byte_more_is_a_payload(
    event_log: EventLog,
) -> None:
    limit = event_log.payload_threshold
    at, over = event_log.append_many([_event("é" * (limit // 2)), _event("x" * (limit + 1))])
    inline, external = event_log.get(at), event_log.get(over)
    assert len(inline.content.encode("utf-8")) == limit
    assert inline.payload_sha256 is None and inline.content == "é" * (limit // 2)
    assert external.payload_sha256 is not None and external.payload_size == limit + 1
    assert event_log.full_text(external) == "x" * (limit + 1)
