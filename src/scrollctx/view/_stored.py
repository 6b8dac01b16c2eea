"""The stored form of the eviction index: each block written once, referenced afterwards.

Every eviction appends an ``eviction_index`` event whose metadata describes the *whole* index
(so the latest event alone answers ``ms.index()`` and :meth:`WorkingView.restore`). Blocks are
immutable once made and most of them survive many evictions, so writing every block in every
event made the index events the bulk of a long session's database (34 MB of 66 MB after the
2,000-step simulation). Here a block already written inline by an earlier index event of the
same session is stored as a reference instead::

    {"stored_at": [seq, tier, position]}

meaning ``tiers[tier]["blocks"][position]`` of the index event at ``seq``, which is always an
inline block (a reference never points at a reference). Everything else in the metadata
(``version``, ``k``, ``counters``, ``view_state``) is stored as is.

Invariants: :func:`unpack` of :func:`pack` gives back exactly the data that was packed; an event
written without references (older versions, a handed-over index) unpacks to itself; a reference
that does not resolve to an inline block is an error the caller reports, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["STORED_AT", "Locations", "block_key", "pack", "stored_locations", "unpack"]

STORED_AT = "stored_at"
"""Key of a block reference in a stored index event."""

Locations = dict[str, tuple[int, int, int]]
"""Where each known block is stored inline: block key -> (event seq, tier, position)."""


def block_key(block: dict[str, Any]) -> str:
    """Return the identity of a block's data (equal data, equal key)."""
    return json.dumps(block, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def pack(data: dict[str, Any], known: Locations) -> dict[str, Any]:
    """Return ``data`` (``EvictionIndex.to_data`` output) with known blocks as references."""
    tiers = [
        {**tier, "blocks": [_packed(block, known) for block in tier["blocks"]]}
        for tier in data["tiers"]
    ]
    return {**data, "tiers": tiers}


def _packed(block: dict[str, Any], known: Locations) -> dict[str, Any]:
    where = known.get(block_key(block))
    return {STORED_AT: list(where)} if where is not None else block


def stored_locations(packed: dict[str, Any], seq: int, known: Locations) -> Locations:
    """Return the locations of every block of ``packed`` once it is stored at ``seq``."""
    keys = {where: key for key, where in known.items()}
    locations: Locations = {}
    for level, tier in enumerate(packed["tiers"]):
        for position, block in enumerate(tier["blocks"]):
            if STORED_AT in block:
                where = _where(block[STORED_AT])
                locations[keys[where]] = where
            else:
                locations[block_key(block)] = (seq, level, position)
    return locations


def unpack(
    stored: dict[str, Any], seq: int, load: Callable[[int], dict[str, Any] | None]
) -> tuple[dict[str, Any], Locations]:
    """Resolve the references of the index event at ``seq``; return the data and locations.

    ``load(seq)`` returns the metadata of an earlier index event of the same session (or
    ``None``). Raises ``ValueError`` when a reference does not resolve to an inline block.
    """
    cache: dict[int, dict[str, Any] | None] = {}
    locations: Locations = {}
    tiers = []
    for level, tier in enumerate(stored["tiers"]):
        blocks = []
        for position, block in enumerate(tier["blocks"]):
            where = (seq, level, position)
            if STORED_AT in block:
                where = _where(block[STORED_AT])
                block = _resolve(where, cache, load)
            locations[block_key(block)] = where
            blocks.append(block)
        tiers.append({**tier, "blocks": blocks})
    return {**stored, "tiers": tiers}, locations


def _where(value: Any) -> tuple[int, int, int]:
    at, level, position = (int(part) for part in value)
    return at, level, position


def _resolve(
    where: tuple[int, int, int],
    cache: dict[int, dict[str, Any] | None],
    load: Callable[[int], dict[str, Any] | None],
) -> dict[str, Any]:
    at, level, position = where
    if at not in cache:
        cache[at] = load(at)
    source = cache[at]
    try:
        block = source["tiers"][level]["blocks"][position] if source else None
    except (KeyError, IndexError, TypeError):
        block = None
    if not isinstance(block, dict) or STORED_AT in block or "lines" not in block:
        raise ValueError(f"block reference {list(where)} does not name a stored index block")
    return block
