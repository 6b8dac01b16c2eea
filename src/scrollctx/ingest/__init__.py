"""Importers: agent transcripts (Claude Code, Codex CLI, Gemini CLI, ChatGPT export, Aider) and
chat data (LoCoMo, BEAM, LongMemEval, OpenAI-style chat files) into the Event Log.

``ingest_path(log, path)`` detects each file's format by content, streams the input and appends
events in batches, one transaction each. Re-importing adds nothing: every event has a
deterministic ``dedup_key`` derived from its source record. ``Watcher`` follows folders of live
transcripts and imports each line once it is complete.
"""

from scrollctx.ingest._ingestion import (
    FORMATS,
    MAX_PROBLEMS,
    FileProgress,
    FormatReport,
    IngestReport,
    Progress,
    ingest_path,
)
from scrollctx.ingest._jsonstream import Sample, iter_array, iter_jsonl, probe
from scrollctx.ingest._registry import (
    Importer,
    detect_importer,
    get_importer,
    importers,
    register_importer,
)
from scrollctx.ingest._transcript import SESSION_KEYS, Follower, Skip
from scrollctx.ingest._watch import SyncReport, Watcher

__all__ = [
    "FORMATS",
    "FileProgress",
    "Follower",
    "FormatReport",
    "Importer",
    "IngestReport",
    "MAX_PROBLEMS",
    "Progress",
    "SESSION_KEYS",
    "Sample",
    "Skip",
    "SyncReport",
    "Watcher",
    "detect_importer",
    "get_importer",
    "importers",
    "ingest_path",
    "iter_array",
    "iter_jsonl",
    "probe",
    "register_importer",
]
