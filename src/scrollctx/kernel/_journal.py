"""What the kernel writes to the Event Log: sandbox status, opt-outs, refusals, bridged calls.

Every worker start or restart is one ``system`` event (kept out of full-text search) carrying each
layer's status in ``metadata.sandbox``. An opt-out profile adds one searchable ``system`` event per
kernel (``metadata.opt_out``); a strict kernel that refuses cells adds one (``metadata.refused``).
Each memory reader start (on the kernel's first ``ms`` call, and each replacement) is one
``system`` event too, its layers in ``metadata.memory_reader``; a strict reader that refuses to
read the store adds one (``metadata.refused``). A bridged tool call is a
``tool_call`` event written *before* the tool runs, then a ``tool_result`` event with the whole
result as JSON (the log externalizes large ones). Writes the log refused during a cell (locked,
full) are recorded later as one ``system`` event (``metadata.store_errors``). With no Event Log
attached, nothing is written. Every method raises :class:`~scrollctx.errors.StoreError` when the
log refuses the write; the kernel decides what that costs.
"""

from __future__ import annotations

from typing import Any

from scrollctx.kernel._policy import SandboxStatus
from scrollctx.log import EventStore, Kind, NewEvent

__all__ = ["KernelJournal"]


class KernelJournal:
    """Appends one kernel's events, tagged with its session, task and agent."""

    def __init__(
        self,
        event_log: EventStore | None,
        session_id: str,
        task_id: str | None,
        agent_id: str | None,
    ) -> None:
        self.event_log = event_log
        self.session_id, self.task_id, self.agent_id = session_id, task_id, agent_id
        self._opt_out_logged = False

    def _append(self, kind: str, content: str, **fields: Any) -> None:
        if self.event_log is None:
            return
        self.event_log.append(
            NewEvent(
                session_id=self.session_id,
                kind=kind,
                content=content,
                agent_id=self.agent_id,
                task_id=self.task_id,
                **fields,
            )
        )

    def tool_call(self, name: str, tool_call_id: str, tool_input: Any, cell: int) -> None:
        """Record that the cell asked the host to run a tool (before it runs)."""
        self._append(
            Kind.TOOL_CALL,
            "",
            role="assistant",
            name=name,
            tool_call_id=tool_call_id,
            tool_input=tool_input,
            metadata={"via": "kernel", "cell": cell},
        )

    def tool_result(
        self, name: str, tool_call_id: str, content: str, *, ok: bool, cell: int
    ) -> None:
        """Record a tool's whole result (JSON) or its error text."""
        self._append(
            Kind.TOOL_RESULT,
            content,
            role="tool",
            name=name,
            tool_call_id=tool_call_id,
            tool_state="ok" if ok else "error",
            metadata={"via": "kernel", "cell": cell},
        )

    def store_errors(self, failures: list[str], cell: int) -> None:
        """Record writes the Event Log refused earlier (now that it takes writes again)."""
        self._append(
            Kind.SYSTEM,
            f"the Event Log refused {len(failures)} kernel write(s) up to cell {cell}: "
            + "; ".join(failures)[:2000],
            name="kernel",
            metadata={"store_errors": failures[:50], "cell": cell},
        )

    def sandbox(self, status: SandboxStatus, reason: str) -> None:
        """Record a worker start: its layers, an opt-out (once), a refusal."""
        meta: dict[str, Any] = {"kernel": reason, "sandbox": status.to_dict()}
        self._started(f"kernel worker {reason}", status, meta)
        if status.is_opt_out and not self._opt_out_logged:
            self._opt_out_logged = True
            self._append(
                Kind.SYSTEM,
                f"sandbox opt-out: the kernel runs with profile {status.profile!r} instead of "
                f"'strict' ({status.summary()})",
                name="kernel",
                metadata={**meta, "opt_out": True},
            )
        self._refused("kernel refuses cells", status, meta)

    def memory_reader(self, status: SandboxStatus, reason: str) -> None:
        """Record a memory reader start: its layers, a refusal."""
        meta: dict[str, Any] = {"kernel": f"memory reader {reason}",
                                "memory_reader": status.to_dict()}  # fmt: skip
        self._started(f"memory reader {reason}", status, meta)
        self._refused("memory reader refuses to read the store", status, meta,
                      "; ms is unavailable in this kernel")  # fmt: skip

    def _started(self, what: str, status: SandboxStatus, meta: dict[str, Any]) -> None:
        # Kept out of full-text search: one per start, the model has no use for it.
        self._append(
            Kind.SYSTEM,
            f"{what} (sandbox {status.profile}: {status.summary()})",
            name="kernel",
            metadata=meta,
            searchable=False,
        )

    def _refused(
        self, what: str, status: SandboxStatus, meta: dict[str, Any], then: str = ""
    ) -> None:
        if status.holds:
            return
        missing = ", ".join(s.name for s in status.missing)
        self._append(
            Kind.SYSTEM,
            f"{what}: required sandbox layer(s) not holding: {missing}{then}",
            name="kernel",
            metadata={**meta, "refused": True},
        )
