"""The encoder of the semantic channel: batches on parallel threads change no vector."""

from __future__ import annotations

import pytest

from scrollctx.surface import Encoder
from scrollctx.surface._semantic_model import BATCH, WINDOW_PIECES


def _with_threads(encoder: Encoder, parallel: int) -> Encoder:
    """The same session and tokenizer, ``parallel`` batches at a time."""
    return Encoder(encoder._session, encoder._tokenizer, encoder._np, parallel)  # noqa: SLF001


def test_parallel_batches_give_the_serial_vectors_bit_for_bit(semantic_encoder: Encoder) -> None:
    words = "we moved the standup to nine and kept the retro "
    texts = [f"turn {i}: " + words * (i % 7) for i in range(80)]
    windows = [window for wins in semantic_encoder.windows_many(texts) for window in wins]
    assert len(windows) > 2 * BATCH  # several batches, of several padded widths
    parallel = _with_threads(semantic_encoder, 2).encode_windows(windows)
    serial = _with_threads(semantic_encoder, 1).encode_windows(windows)
    assert parallel.tobytes() == serial.tobytes()


def test_a_failing_batch_raises_from_the_parallel_call(semantic_encoder: Encoder) -> None:
    too_long = [[1000] * (WINDOW_PIECES + 300)]  # past the model's 512 positions
    windows = [[1000, 1001]] * (2 * BATCH) + too_long
    with pytest.raises(Exception, match="ONNXRuntimeError"):
        _with_threads(semantic_encoder, 2).encode_windows(windows)


def test_a_window_gets_the_same_bits_whatever_it_is_padded_with(semantic_encoder: Encoder) -> None:
    # What lets embed_pending take BATCH_ROWS rows per batch: a window's padded width (the
    # longest window of its group) changes, its vector does not.
    texts = ["ok", "the deploy failed because the TLS certificate expired", "sprint " * 120]
    windows = [window for wins in semantic_encoder.windows_many(texts) for window in wins]
    together = _with_threads(semantic_encoder, 1).encode_windows(windows)
    alone = [semantic_encoder.encode_windows([window])[0] for window in windows]
    assert [row.tobytes() for row in together] == [row.tobytes() for row in alone]
