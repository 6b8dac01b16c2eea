"""The fixed development / test split of the retrieval benchmarks, by conversation.

Every tuning choice of the search (BM25 column weights and stop words, the fusion's weights,
``ms.search``'s default mode) is made on the development conversations only; reports show the
test conversations. The split is by whole conversation, so no test question shares a corpus
with a tuning question:

- LoCoMo: the first four samples of ``locomo10.json`` (``conv-26``, ``conv-30``, ``conv-41``,
  ``conv-42``) are development; the other six are test.
- BEAM 100K and 500K: the first third of each tier's chats by number (100K: chats 1-7 of 20;
  500K: chats 1-12 of 35) are development; the rest are test.
- BEAM 1M: never used for tuning; every chat is test (a further check at another length).

The rule names conversations, not positions in whatever data is present, so a missing chat
never moves another one across the line.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DEV_BEAM_CHATS", "DEV_LOCOMO", "SPLITS", "Split", "split_of"]

Split = Literal["dev", "test"]
SPLITS: tuple[str, ...] = ("dev", "test", "all")

DEV_LOCOMO = frozenset({"conv-26", "conv-30", "conv-41", "conv-42"})
DEV_BEAM_CHATS = {"100K": 7, "500K": 12, "1M": 0}
"""Per BEAM tier, chats 1..N are development."""


def split_of(section: str, key: str) -> Split:
    """Return the split of one conversation (``section`` as in reports, ``key`` its id).

    Example: ``split_of("beam/500K", "500K/12")`` -> ``"dev"``; ``("locomo", "conv-43")`` -> test
    """
    if section == "locomo":
        return "dev" if key in DEV_LOCOMO else "test"
    tier, _, number = key.partition("/")
    last_dev = DEV_BEAM_CHATS.get(tier, 0)
    return "dev" if number.isdigit() and 1 <= int(number) <= last_dev else "test"
