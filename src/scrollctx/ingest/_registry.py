"""The importer registry: format names mapped to a content sniffer and an event generator.

Built-in importers register here the same way an extension would, through
:func:`register_importer`. Detection is by content (the file's shape and first record), never
by file name; the first registered sniffer that accepts a sample wins, in registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from scrollctx.errors import FormatError, UsageError
from scrollctx.ingest._aider import AiderFile, read_aider, sniff_aider
from scrollctx.ingest._beam import read_beam, sniff_beam
from scrollctx.ingest._chatgpt import read_chatgpt, sniff_chatgpt
from scrollctx.ingest._claude import ClaudeFile, read_claude, sniff_claude
from scrollctx.ingest._codex import CodexFile, read_codex, sniff_codex
from scrollctx.ingest._gemini import read_gemini, sniff_gemini
from scrollctx.ingest._jsonstream import Sample, not_json
from scrollctx.ingest._locomo import read_locomo, sniff_locomo
from scrollctx.ingest._longmemeval import read_longmemeval, sniff_longmemeval
from scrollctx.ingest._openai import read_openai, sniff_openai
from scrollctx.ingest._transcript import Follower, Item

__all__ = [
    "AUTO",
    "Importer",
    "detect_importer",
    "get_importer",
    "importers",
    "register_importer",
    "require_importer",
]

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class Importer:
    """One input format: ``sniff`` says whether a sample is this format, ``read`` yields events.

    ``read`` may also yield :class:`~scrollctx.ingest._transcript.Skip` items for source records
    it did not turn into events (counted and reported by the ingestion, never dropped
    silently). ``follow`` (formats that grow while an agent writes them) makes a
    :class:`~scrollctx.ingest._transcript.Follower` that reads only what is new on each call;
    without one, ``scroll watch`` reads a changed file again whole.
    """

    name: str
    sniff: Callable[[Sample], bool]
    read: Callable[[Path, Sample], Iterator[Item]]
    follow: Callable[[Path], Follower] | None = None


_IMPORTERS: dict[str, Importer] = {}


def register_importer(importer: Importer) -> None:
    """Add (or replace) the importer for ``importer.name``."""
    if importer.name == AUTO:
        raise UsageError(f"{AUTO!r} is reserved for detection; name the importer otherwise")
    _IMPORTERS[importer.name] = importer


def importers() -> list[Importer]:
    """Return the registered importers in registration (detection) order."""
    return list(_IMPORTERS.values())


def get_importer(name: str) -> Importer:
    """Return the importer called ``name``; raise :class:`UsageError` for an unknown name."""
    try:
        return _IMPORTERS[name]
    except KeyError:
        known = ", ".join([AUTO, *_IMPORTERS])
        raise UsageError(f"unknown format {name!r}; choose one of: {known}") from None


def detect_importer(sample: Sample) -> Importer | None:
    """Return the first importer whose sniffer accepts ``sample``, or ``None``."""
    for importer in _IMPORTERS.values():
        if importer.sniff(sample):
            return importer
    return None


def require_importer(sample: Sample, name: str) -> Importer:
    """Resolve ``name`` (or detect, for ``auto``) and check the sample really is that format."""
    if name == AUTO:
        found = detect_importer(sample)
        if found is None and sample.shape == "text":
            raise not_json(sample)
        if found is None:
            raise FormatError(
                f"{sample.path} is JSON but matches no known format "
                f"({', '.join(_IMPORTERS)}); pass --format if you know which it is",
                path=str(sample.path),
            )
        return found
    importer = get_importer(name)
    if not importer.sniff(sample):
        raise FormatError(
            f"{sample.path} does not look like {name} data (its {sample.shape} does not have the "
            f"{name} fields); check the file or use --format auto",
            path=str(sample.path),
        )
    return importer


for _builtin in (
    Importer("claude-code", sniff_claude, read_claude, ClaudeFile),
    Importer("codex", sniff_codex, read_codex, CodexFile),
    Importer("gemini-cli", sniff_gemini, read_gemini),
    Importer("chatgpt", sniff_chatgpt, read_chatgpt),
    Importer("aider", sniff_aider, read_aider, AiderFile),
    Importer("locomo", sniff_locomo, read_locomo),
    Importer("beam", sniff_beam, read_beam),
    Importer("longmemeval", sniff_longmemeval, read_longmemeval),
    Importer("openai", sniff_openai, read_openai),
):
    register_importer(_builtin)
