"""The development/test split is fixed by conversation name, deterministic and disjoint."""

from __future__ import annotations

from pathlib import Path

from scrollctx.bench import beam_conversations, locomo_conversations, split_of
from scrollctx.bench._split import DEV_BEAM_CHATS, DEV_LOCOMO


def test_the_rule_names_conversations() -> None:
    assert split_of("locomo", "conv-26") == "dev" and split_of("locomo", "conv-43") == "test"
    assert [split_of("beam/100K", f"100K/{n}") for n in (1, 7, 8, 20)] == [
        "dev", "dev", "test", "test"
    ]  # fmt: skip
    assert split_of("beam/500K", "500K/12") == "dev" and split_of("beam/500K", "500K/13") == "test"
    assert all(split_of("beam/1M", f"1M/{n}") == "test" for n in range(1, 36))  # never tuned
    assert split_of("beam/100K", "100K/x") == "test"


def test_split_of_the_shared_data_is_disjoint_and_a_third(
    shared_data: Path, tmp_path: Path
) -> None:
    conversations = locomo_conversations(shared_data / "locomo" / "locomo10.json", tmp_path)
    conversations += beam_conversations(shared_data / "beam" / "chats", ["100K", "500K", "1M"])
    again = beam_conversations(shared_data / "beam" / "chats", ["100K", "500K", "1M"])
    assert [c.split for c in conversations[10:]] == [c.split for c in again]  # deterministic
    dev = {(c.section, c.key) for c in conversations if c.split == "dev"}
    test = {(c.section, c.key) for c in conversations if c.split == "test"}
    assert not dev & test and len(dev | test) == len(conversations)
    assert {k for s, k in dev if s == "locomo"} == DEV_LOCOMO
    for tier, last in DEV_BEAM_CHATS.items():
        assert {k for s, k in dev if s == f"beam/{tier}"} == {
            f"{tier}/{n}" for n in range(1, last + 1)
        }
