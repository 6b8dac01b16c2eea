"""What one cell returns (:class:`CellResult`) and exactly how the model sees it.

:func:`render_observation` is the single place a cell result becomes model input. Its shape::

    [sandbox] opt-out 'off': ...            (every observation of an opted-out kernel)
    [kernel] ... namespace lost ...         (the worker was restarted before or during the cell)
    stdout:
    <head of stdout>
    [stdout cut: N more characters hidden. ...]
    stderr:
    <head of stderr>
    error: <traceback>
    [note] ...                              (notes from ms calls and the kernel)

or ``(no output)`` when the cell printed nothing, raised nothing and left no notes.

Bounds (the host applies them to whatever the worker sends, the worker to what it sends): stdout
and stderr their caps, the error :data:`ERROR_CHARS` (head and tail kept), the notes
:data:`NOTES_CHARS` in all (:func:`cap_notes`). An observation is therefore never longer than
the two output caps plus these allowances and a few fixed lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from scrollctx.kernel._digest import FIELD_CHARS, MAX_ENTRIES, DigestEntry
from scrollctx.kernel._policy import SandboxStatus

__all__ = [
    "ERROR_CHARS",
    "NOTES_CHARS",
    "CellResult",
    "cap_error",
    "cap_notes",
    "render_observation",
    "result_frame_limit",
]

ERROR_CHARS = 4_000
"""The longest error (traceback) an observation shows: its head and its end are kept."""

NOTE_CHARS = 600
"""The longest single note."""

NOTES_CHARS = 4_000
"""The most characters all notes of one cell may take (at most :data:`MAX_NOTES` of them)."""

MAX_NOTES = 20


@dataclass(frozen=True, slots=True)
class CellResult:
    """The outcome of one cell.

    ``error`` holds the exception with its traceback (cell frames only) or the kernel's own
    explanation (timeout, crash, refusal). ``namespace_lost`` is true when the worker was
    restarted before or during this cell, so every variable from earlier cells is gone.
    """

    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    duration: float = 0.0
    digest: tuple[DigestEntry, ...] = ()
    digest_more: int = 0
    notes: tuple[str, ...] = ()
    namespace_lost: bool = False
    kernel_notice: str | None = None
    stdout_hidden: int = 0
    stderr_hidden: int = 0
    timed_out: bool = False
    interrupted: bool = False
    refused: bool = False
    sandbox: SandboxStatus | None = None
    cell_index: int = 0
    tool_calls: tuple[str, ...] = field(default_factory=tuple)
    """The ``tool_call_id`` of every bridged tool call this cell made, in order."""

    @property
    def ok(self) -> bool:
        """Whether the cell ran to the end without an error."""
        return self.error is None and not self.refused


def render_observation(result: CellResult) -> str:
    """Return exactly the text the model sees for this cell."""
    parts: list[str] = []
    if result.sandbox is not None and result.sandbox.is_opt_out:
        parts.append(_opt_out_line(result.sandbox))
    if result.kernel_notice:
        parts.append(f"[kernel] {result.kernel_notice}")
    if result.stdout or result.stdout_hidden:
        parts.append("stdout:\n" + result.stdout.rstrip("\n"))
        if result.stdout_hidden:
            parts.append(_cut_note("stdout", result.stdout_hidden))
    if result.stderr or result.stderr_hidden:
        parts.append("stderr:\n" + result.stderr.rstrip("\n"))
        if result.stderr_hidden:
            parts.append(_cut_note("stderr", result.stderr_hidden))
    if result.error:
        parts.append("error: " + result.error.rstrip("\n"))
    parts += [f"[note] {note}" for note in result.notes]
    body = [p for p in parts if not p.startswith("[sandbox]")]
    if not body:
        parts.append("(no output)")
    return "\n".join(parts)


def cap_error(text: str | None) -> str | None:
    """Cut a long error to :data:`ERROR_CHARS`: the head says where, the end says what."""
    if text is None or len(text) <= ERROR_CHARS:
        return text
    head, tail = ERROR_CHARS // 4, ERROR_CHARS * 3 // 4 - 40
    return f"{text[:head]}\n[… {len(text) - head - tail:,} characters cut …]\n{text[-tail:]}"


def cap_notes(notes: Iterable[str]) -> tuple[str, ...]:
    """Drop repeated notes, cut each to :data:`NOTE_CHARS`, keep :data:`NOTES_CHARS` in all."""
    kept: list[str] = []
    used, dropped = 0, 0
    for note in dict.fromkeys(notes):
        text = note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 1] + "…"
        if len(kept) == MAX_NOTES or used + len(text) > NOTES_CHARS:
            dropped += 1
            continue
        kept.append(text)
        used += len(text)
    if dropped:
        kept.append(f"{dropped} more notes not shown")
    return tuple(kept)


def result_frame_limit(stdout_cap: int, stderr_cap: int) -> int:
    """The largest result frame an honest worker sends, in bytes.

    Every character of a text field may take 6 bytes of JSON (a control character becomes
    ``\\u001b``); the digest holds at most :data:`MAX_ENTRIES` entries of three fields; a fixed
    allowance covers keys, counts and punctuation.
    """
    chars = stdout_cap + stderr_cap + ERROR_CHARS + NOTES_CHARS + MAX_ENTRIES * 3 * FIELD_CHARS
    return 6 * chars + 64 * (MAX_NOTES + MAX_ENTRIES) + 4096


def _cut_note(stream: str, hidden: int) -> str:
    return (
        f"[{stream} cut: {hidden:,} more characters hidden. Your variables persist in the "
        "kernel; print less (a slice, len(), a summary) to see what you need.]"
    )


def _opt_out_line(status: SandboxStatus) -> str:
    weak = [s.name for s in status.layers if not s.holds]
    if status.profile == "off":
        return "[sandbox] opt-out 'off': no sandbox layer is applied to this kernel"
    missing = ", ".join(weak) if weak else "none"
    return f"[sandbox] opt-out '{status.profile}': layers not holding: {missing}"
