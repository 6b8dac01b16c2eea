"""A vector cache for benchmark runs: each encoded window is kept on disk by its word-piece ids.

Embedding every BEAM turn takes hours on two cores, and each evaluation ingests fresh stores;
this cache lets later runs reuse the vectors of windows already encoded. The key is the sha256
of the model name and the window's ids, so a cached vector is exactly what the encoder would
return for that window (and a different model or tokenizer never hits). The cache is a SQLite
file; concurrent writers are safe (each batch is one transaction).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrollctx.surface import Encoder

if TYPE_CHECKING:
    from scrollctx.surface._semantic_model import Vectors

__all__ = ["CachedEncoder"]


class CachedEncoder(Encoder):
    """An :class:`Encoder` that looks each window up in a cache file before encoding it."""

    def __init__(self, encoder: Encoder, path: Path) -> None:
        self._inner = encoder
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, v BLOB)")
        self.hits = 0
        self.misses = 0

    def windows(self, text: str) -> list[list[int]]:
        return self._inner.windows(text)

    def windows_many(self, texts: Sequence[str]) -> list[list[list[int]]]:
        return self._inner.windows_many(texts)

    def encode_query(self, text: str) -> Vectors:
        return self._inner.encode_query(text)

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> Vectors:
        import numpy as np

        keys = [self._key(w) for w in windows]
        found = self._lookup(keys)
        missing = [i for i, key in enumerate(keys) if key not in found]
        self.hits += len(windows) - len(missing)
        self.misses += len(missing)
        out = np.zeros((len(windows), self.dim), dtype=np.float32)
        if missing:
            fresh = self._inner.encode_windows([windows[i] for i in missing])
            out[missing] = fresh
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany(
                "INSERT OR IGNORE INTO vectors (key, v) VALUES (?, ?)",
                [(keys[i], fresh[j].tobytes()) for j, i in enumerate(missing)],
            )
            self._conn.execute("COMMIT")
        for i, key in enumerate(keys):
            if key in found:
                out[i] = np.frombuffer(found[key], dtype=np.float32)
        return out

    def close(self) -> None:
        """Close the cache file."""
        self._conn.close()

    def _key(self, window: Sequence[int]) -> bytes:
        data = f"{self._inner.name}|" + ",".join(map(str, window))
        return hashlib.sha256(data.encode()).digest()

    def _lookup(self, keys: list[bytes]) -> dict[bytes, Any]:
        found: dict[bytes, Any] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in self._conn.execute(
                f"SELECT key, v FROM vectors WHERE key IN ({marks})", chunk
            ):
                found[key] = value
        return found
