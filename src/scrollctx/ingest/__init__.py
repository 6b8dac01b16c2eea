"""Importers: LoCoMo, BEAM, LongMemEval and OpenAI-style chat files into the Event Log.

``ingest_path(log, path)`` detects the format by content, streams the input (a top-level JSON
array is decoded element by element) and appends ``conversation`` events in batches, one
transaction each. Re-importing adds nothing: every event has a deterministic ``dedup_key``.
"""

from scrollctx.ingest._ingestion import FORMATS, IngestReport, Progress, ingest_path
from scrollctx.ingest._jsonstream import Sample, iter_array, iter_jsonl, probe
from scrollctx.ingest._registry import (
    Importer,
    detect_importer,
    get_importer,
    importers,
    register_importer,
)

__all__ = [
    "FORMATS",
    "Importer",
    "IngestReport",
    "Progress",
    "Sample",
    "detect_importer",
    "get_importer",
    "importers",
    "ingest_path",
    "iter_array",
    "iter_jsonl",
    "probe",
    "register_importer",
]
