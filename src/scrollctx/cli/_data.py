"""Where the benchmark data lives: ``--data DIR``, else ``./shared/data`` or ``../shared/data``."""

from __future__ import annotations

from pathlib import Path

from scrollctx.errors import UsageError

__all__ = ["data_root"]


def data_root(data_dir: str | None) -> Path:
    """Return the benchmark data folder, or raise :class:`UsageError` naming ``--data``."""
    if data_dir is not None:
        root = Path(data_dir)
        if not root.is_dir():
            raise UsageError(f"benchmark data folder {root} does not exist; pass --data DIR")
        return root
    for candidate in (Path("shared/data"), Path("../shared/data")):
        if candidate.is_dir():
            return candidate
    raise UsageError("benchmark data not found in ./shared/data or ../shared/data; pass --data DIR")
