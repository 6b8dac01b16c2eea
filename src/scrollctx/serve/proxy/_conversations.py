"""Conversations: which logged session a client request continues, found by prefix digests.

A client resends its whole history on every call. Each message of a request gets a *position*
(the system prompt is position 0) and a *chain digest* of everything up to it
(:func:`~._wire.chain_digest` over the wire's fingerprints, seeded with the session
namespace: the ``X-Scroll-Session`` header or the client's key when the door keys sessions so).
The log records them on every event of a client-visible message as
``metadata.proxy = {"at": position, "chain": digest}``; the events the client never sees (recall
steps and their results) carry ``{"at": position, "hidden": true}`` of the reply they belong to.

Matching a request (dictionary lookups only, no log read):

1. Digest the request's messages. The conversations used last remember what their client sent
   (objects and digests); a request that resends it is compared object by object (a message
   that differs as an object but not by fingerprint, such as an SDK's echo of our reply, still
   matches), so only its new messages are digested: resending 2,000 turns costs one pass of
   equality checks, not 2,000 digests.
2. Find the longest prefix a session logged. If it is the last message some session logged (its
   *tip*), the request continues that session: only the messages after it are appended.
3. If a session logged that prefix and went on differently (the client edited, regenerated or
   forked), the request goes to a new *branch* that shares the prefix
   (:func:`~scrollctx.view.branch_view`, lineage in ``metadata.proxy.branch_of``).
4. If nothing matches, it starts a new conversation.

Only the new messages are checked in detail (:meth:`~._wire.Wire.check`): the logged ones
were checked when they were new. New messages that push the view past its window while they
are added (a client's first request of thousands) are evicted as they come, in the same
transaction. A request's new messages are committed in one transaction
without a flush of its own, and flushed to disk (:meth:`~scrollctx.log.EventStore.flush`)
before the upstream is called: :meth:`Admission.wait_durable` returns once they are on disk.
When Algorithm 1 is to run first (the view is past ``rho * C``), the flush runs on a helper
thread meanwhile (the disk's wait, 1-9 ms on the benchmark's machine, overlaps the eviction
instead of adding to it). Invariants: a request's new messages are appended in one
transaction and are on disk before upstream is called;
a session only ever gets messages that extend its own logged history; a session serves one
request at a time (its lock); every session of one tree (a conversation and its branches)
shares one ``agent_id``, so ``ms.search`` sees that tree by default and the rest of the store
with ``all_agents=True``; the state is a function of the log (:meth:`Conversations.load`).
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from scrollctx.errors import ContextOverflow, UsageError
from scrollctx.log import EventStore, Kind, NewEvent
from scrollctx.serve.proxy._wire import ClientRequest, Wire, chain_digest, fields
from scrollctx.view import WorkingView, branch_view

__all__ = ["Admission", "Conversation", "Conversations", "ViewSettings"]

PROXY_KEY = "proxy"
_PREFIX = "proxy-"
_RECENT = 64
"""Conversations whose last request is kept in memory for the fast prefix match."""


@dataclass(frozen=True, slots=True)
class ViewSettings:
    """The working view's knobs, the same for every conversation of a proxy."""

    budget_tokens: int | None = None
    """The window C of every conversation (``--budget-tokens``); None: C of the model each
    request names (:class:`~._windows.ModelWindows`)."""
    rho: float = 0.8
    k: int = 4
    tail_groups: int = 2
    keep_results: int = 3
    evict_to: float | None = None

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~scrollctx.view.WorkingView` but its window."""
        return {
            "rho": self.rho,
            "k": self.k,
            "tail_groups": self.tail_groups,
            "keep_results": self.keep_results,
            "evict_to": self.evict_to,
        }


@dataclass(eq=False)
class Conversation:
    """One logged session the proxy serves; use only while holding :attr:`lock`."""

    session_id: str
    agent_id: str
    wire: str
    system: str
    """The client's system prompt (the view's adds Scroll's rules)."""
    tip: int = 0
    tip_digest: str = ""
    ends: dict[int, int] = field(default_factory=dict)
    """Position -> the seq of the last event logged for it (the point a fork continues from)."""
    view: WorkingView | None = None
    seen: tuple[Any, ...] = ()
    """What its client sent last (positions 1..), for matching the next request fast."""
    digests: list[str] = field(default_factory=list)
    """The chain digests of ``seen`` (position 0, the system prompt, first)."""
    state: dict[str, Any] = field(default_factory=dict)
    """What the door keeps per conversation besides the view (its tool context)."""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reply_marks(self, fingerprint: bytes) -> dict[str, Any]:
        """``metadata.proxy`` of the reply that becomes the next position."""
        return {"at": self.tip + 1, "chain": chain_digest(self.tip_digest, fingerprint)}

    def hidden_marks(self) -> dict[str, Any]:
        """``metadata.proxy`` of an event of the next reply that the client does not see."""
        return {"at": self.tip + 1, "hidden": True}


@dataclass(frozen=True, slots=True)
class Admission:
    """A request admitted into a conversation whose lock the caller now holds."""

    conversation: Conversation
    how: str
    """``continued``, ``new`` or ``branched``."""
    appended: int
    """Messages of the request that were new to the log."""
    durable: Callable[[], object]
    """Returns once they are on disk (see :meth:`Conversations.admit`)."""

    def wait_durable(self) -> None:
        """Return once the request's messages are on disk.

        Raises:
            StoreError: the disk refused the flush.
        """
        self.durable()


class Conversations:
    """The proxy's sessions and the digests that find them (see the module docstring).

    Args:
        log: the Event Log (the proxy's writer).
        settings: the working view's knobs.
        system_prompt: builds the view's system prompt from the client's.
        window: the view's window C for the model a request names (default:
            ``settings.budget_tokens`` for every model).
    """

    def __init__(
        self,
        log: EventStore,
        settings: ViewSettings,
        system_prompt: Callable[[str], str],
        window: Callable[[object], int] | None = None,
    ) -> None:
        self.log, self.settings, self.system_prompt = log, settings, system_prompt
        self.window = window or _fixed(settings.budget_tokens)
        self._lock = threading.Lock()
        self._sessions: dict[str, Conversation] = {}
        self._nodes: dict[str, tuple[str, int]] = {}
        self._tips: dict[str, str] = {}
        self._by_root: dict[str, list[Conversation]] = {}
        self._recent: OrderedDict[str, Conversation] = OrderedDict()
        self._flusher = ThreadPoolExecutor(4, thread_name_prefix="scroll-serve-flush")

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def get(self, session_id: str) -> Conversation | None:
        """The conversation logged as ``session_id``, if the proxy knows it."""
        with self._lock:
            return self._sessions.get(session_id)

    def sessions(self) -> list[Conversation]:
        """Every conversation, oldest first."""
        with self._lock:
            return list(self._sessions.values())

    # -- admitting a request ---------------------------------------------------------------

    def admit(self, request: ClientRequest, wire: Wire, namespace: str = "") -> Admission:
        """Log the request's new messages in the session it continues; return it locked.

        The messages are committed; their flush to disk is under way
        (:meth:`Admission.wait_durable`).

        Raises:
            UsageError: a message cannot extend the session (e.g. a tool result without its
                call); nothing of the request was logged.
            StoreError: the log refused the write; nothing of the request was logged.
        """
        chain = self._chain(request, wire, namespace)
        budget = self.window(request.params.get("model"))
        while True:
            conversation, start, how = self._target(request, chain, budget)
            if how == "continued":
                conversation.lock.acquire()
                if conversation.tip != start or conversation.tip_digest != chain[start]:
                    conversation.lock.release()  # another request moved it on: look again
                    continue
            break
        try:
            appended = self._append(conversation, request, wire, chain, start, budget)
        except BaseException:
            conversation.lock.release()
            raise
        return Admission(conversation, how, appended, self._durability(conversation))

    def _durability(self, conversation: Conversation) -> Callable[[], object]:
        """How the request's messages reach the disk before the upstream has them: flushed on
        a helper thread, overlapping Algorithm 1, when the view is past ``rho * C`` (it runs
        before the upstream call); else flushed when waited for, on the request's thread (two
        thread wake-ups cost more than the 0.2 ms of work left to overlap)."""
        view = conversation.view
        if view is not None and view.tokens > view.target:
            return self._flusher.submit(self.log.flush).result
        return self.log.flush

    def release(self, conversation: Conversation) -> None:
        """Let the next request of this conversation in."""
        conversation.lock.release()

    def close(self) -> None:
        """Finish the flushes under way and stop their threads."""
        self._flusher.shutdown(wait=True)

    def _chain(self, request: ClientRequest, wire: Wire, namespace: str) -> list[str]:
        seed = hashlib.sha256(f"scroll-proxy\n{request.wire}\n{namespace}".encode()).hexdigest()
        chain = [chain_digest(seed, fields("system", request.system.strip()))]
        messages = request.messages
        if messages:
            chain.append(chain_digest(chain[0], wire.fingerprint(messages[0])))
            chain = self._known_prefix(chain[1], messages, wire) or chain
        for message in messages[len(chain) - 1 :]:
            chain.append(chain_digest(chain[-1], wire.fingerprint(message)))
        return chain

    def _known_prefix(self, root: str, messages: tuple[Any, ...], wire: Wire) -> list[str] | None:
        """The digests of the longest prefix of ``messages`` that a recently used conversation
        of this root saw (compared object by object; a message that differs as an object
        still matches when its fingerprint does), or None."""
        with self._lock:
            candidates = [(c.seen, c.digests) for c in self._by_root.get(root, ()) if c.seen]
        best: list[str] | None = None
        for seen, digests in candidates:
            known = _matched(messages, seen, digests, wire)
            if best is None or known >= len(best):
                best = digests[: known + 1]
        return best

    def _target(
        self, request: ClientRequest, chain: list[str], budget: int
    ) -> tuple[Conversation, int, str]:
        with self._lock:
            for position in range(len(chain) - 1, -1, -1):
                digest = chain[position]
                tip = self._tips.get(digest)
                if tip is not None:
                    return self._sessions[tip], position, "continued"
                node = self._nodes.get(digest)
                if node is not None and position > 0:
                    return self._branch(*node, chain, budget), position, "branched"
            return self._start(request, chain[0]), 0, "new"

    def _start(self, request: ClientRequest, digest: str) -> Conversation:
        """A new conversation, locked, registered (the caller holds ``self._lock``)."""
        session_id = _PREFIX + uuid.uuid4().hex[:12]
        conversation = Conversation(session_id, session_id, request.wire, request.system)
        with self.log.atomic(durable=False):  # on disk with the request's flush
            seq = self.log.append(self._start_event(conversation, {"chain": digest}))
        return self._register_new(conversation, 0, digest, seq)

    def _branch(self, parent_id: str, position: int, chain: list[str], budget: int) -> Conversation:
        """A branch of ``parent_id`` at ``position``, locked, registered (lock held)."""
        parent = self._sessions[parent_id]
        session_id = _PREFIX + uuid.uuid4().hex[:12]
        conversation = Conversation(session_id, parent.agent_id, parent.wire, parent.system)
        lineage = {"branch_of": parent_id, "fork_at": position, "chain": chain[position]}
        with self.log.atomic(durable=False):  # on disk with the request's flush
            self.log.append(self._start_event(conversation, lineage))
        at_fork = WorkingView.restore(
            self.log,
            parent_id,
            self.system_prompt(parent.system),
            before_seq=parent.ends[position] + 1,
            budget_tokens=budget,
            **self.settings.as_kwargs(),
        )
        conversation.view = branch_view(
            at_fork, session_id, event_fields={"agent_id": conversation.agent_id}
        )
        return self._register_new(conversation, position, chain[position], self.log.last_seq())

    def _register_new(
        self, conversation: Conversation, tip: int, digest: str, seq: int
    ) -> Conversation:
        conversation.lock.acquire()  # nobody else can hold it yet: it is not registered
        conversation.tip, conversation.tip_digest = tip, digest
        conversation.ends[tip] = seq
        self._sessions[conversation.session_id] = conversation
        self._nodes.setdefault(digest, (conversation.session_id, tip))
        self._tips[digest] = conversation.session_id
        return conversation

    def _start_event(self, conversation: Conversation, marks: Mapping[str, Any]) -> NewEvent:
        what = "branch" if "branch_of" in marks else "conversation"
        return NewEvent(
            session_id=conversation.session_id,
            kind=Kind.SYSTEM,
            role="system",
            name="proxy",
            content=conversation.system,
            metadata={PROXY_KEY: {"at": 0, "wire": conversation.wire, "start": what, **marks}},
            searchable=False,
            agent_id=conversation.agent_id,
        )

    def _append(
        self,
        conversation: Conversation,
        request: ClientRequest,
        wire: Wire,
        chain: list[str],
        start: int,
        budget: int,
    ) -> int:
        view = self.view(conversation, budget)
        new = request.messages[start:]
        for at, message in enumerate(new, start=start + 1):
            wire.check(message, request.offset + at - 1)
        added = []
        try:
            with self.log.atomic(durable=False):  # flushed before upstream (Admission)
                for at, message in enumerate(new, start=start + 1):
                    marks = {"metadata": {PROXY_KEY: {"at": at, "chain": chain[at]}}}
                    turns = view.add(dict(message), provider=conversation.wire, fields=marks)
                    added.append(turns)
                    if view.tokens > view.budget_tokens:
                        _evict_as_added(view)
                view.persist()
        except BaseException:
            conversation.view = None  # the pending turns must go: rebuilt from the log
            raise
        for at, turns in enumerate(added, start=start + 1):
            self.advance(conversation, chain[at], max(t.seq or 0 for t in turns))
        self._remember(conversation, request.messages, chain)
        return len(new)

    def _remember(
        self, conversation: Conversation, seen: tuple[Any, ...], digests: list[str]
    ) -> None:
        """Keep what the client sent for its next request (the most recent conversations only)."""
        with self._lock:
            conversation.seen, conversation.digests = seen, digests
            if len(digests) > 1:
                tree = self._by_root.setdefault(digests[1], [])
                if conversation not in tree:
                    tree.append(conversation)
            self._recent[conversation.session_id] = conversation
            self._recent.move_to_end(conversation.session_id)
            while len(self._recent) > _RECENT:
                _, old = self._recent.popitem(last=False)
                old.seen, old.digests = (), []

    # -- after upstream --------------------------------------------------------------------

    def advance(self, conversation: Conversation, digest: str, seq: int) -> None:
        """Record that the conversation's next position was logged, ending at ``seq``."""
        with self._lock:
            if self._tips.get(conversation.tip_digest) == conversation.session_id:
                del self._tips[conversation.tip_digest]
            conversation.tip += 1
            conversation.tip_digest = digest
            conversation.ends[conversation.tip] = seq
            self._nodes.setdefault(digest, (conversation.session_id, conversation.tip))
            self._tips[digest] = conversation.session_id

    def record_reply(
        self, conversation: Conversation, reply: Mapping[str, Any], digest: str, seq: int
    ) -> None:
        """The reply the client got was logged as the next position, ending at ``seq``."""
        self.advance(conversation, digest, seq)
        if conversation.seen:
            self._remember(conversation, (*conversation.seen, dict(reply)),
                           [*conversation.digests, digest])  # fmt: skip

    def extend_tip(self, conversation: Conversation, seq: int) -> None:
        """Record that more (hidden) events of the tip's reply were logged, up to ``seq``."""
        conversation.ends[conversation.tip] = max(conversation.ends[conversation.tip], seq)

    def view(self, conversation: Conversation, budget: int | None = None) -> WorkingView:
        """The conversation's working view, restored from the log on first use.

        ``budget``: the window C of the model the request being admitted names; the view
        takes it (default: it keeps its own).
        """
        if conversation.view is None:
            conversation.view = WorkingView.restore(
                self.log,
                conversation.session_id,
                self.system_prompt(conversation.system),
                event_fields={"agent_id": conversation.agent_id},
                budget_tokens=budget or self.window(None),
                **self.settings.as_kwargs(),
            )
        elif budget is not None:
            conversation.view.budget_tokens = budget
        return conversation.view

    # -- after a restart -------------------------------------------------------------------

    def load(self) -> int:
        """Rebuild every conversation the log holds (views open lazily); return how many."""
        rows = self.log.execute(
            "SELECT seq, session_id, agent_id, kind, metadata FROM conversation_history "
            "WHERE agent_id >= ? AND agent_id < ? AND json_extract(metadata, '$.proxy') "
            "IS NOT NULL ORDER BY seq",
            (_PREFIX, _PREFIX[:-1] + "."),
        )
        with self._lock:
            for row in rows:
                self._load_row(row)
            for conversation in self._sessions.values():
                self._tips[conversation.tip_digest] = conversation.session_id
            return len(self._sessions)

    def _load_row(self, row: Any) -> None:
        metadata = json.loads(row["metadata"])
        marks, seq = metadata[PROXY_KEY], int(row["seq"])
        session_id, at = str(row["session_id"]), int(marks["at"])
        if marks.get("start") is not None:
            self._load_start(row, marks)
            return
        conversation = self._sessions.get(session_id)
        if conversation is None:
            return  # its start event is not the proxy's: nothing to continue
        if marks.get("hidden"):
            if at == conversation.tip and at in conversation.ends:  # results after the reply
                conversation.ends[at] = max(conversation.ends[at], seq)
            return
        digest = str(marks["chain"])
        conversation.ends[at] = max(conversation.ends.get(at, 0), seq)
        if at >= conversation.tip:
            conversation.tip, conversation.tip_digest = at, digest
        if "copy_of" not in metadata:  # a branch's copy: the original is the node
            self._nodes.setdefault(digest, (session_id, at))

    def _load_start(self, row: Any, marks: Mapping[str, Any]) -> None:
        seq, session_id = int(row["seq"]), str(row["session_id"])
        system = self.log.full_text(self.log.get(seq))
        conversation = Conversation(session_id, str(row["agent_id"]), str(marks["wire"]), system)
        conversation.tip = int(marks.get("fork_at", 0))
        conversation.tip_digest = str(marks["chain"])
        conversation.ends[conversation.tip] = seq
        self._sessions[session_id] = conversation
        if conversation.tip == 0:
            self._nodes.setdefault(conversation.tip_digest, (session_id, 0))


def _evict_as_added(view: WorkingView) -> None:
    """Algorithm 1 on a view that the new messages of one request have pushed past its window.

    As if the client had sent them over several requests: evicted all at once, thousands of
    messages became one index block (one line per exchange), itself larger than the window.
    Should even this not fit, the request's own Algorithm 1, once every message is added,
    says so (``context_length_exceeded``, its messages logged).
    """
    try:
        view.ensure_budget()
    except ContextOverflow:
        pass


def _fixed(budget: int | None) -> Callable[[object], int]:
    if budget is None:
        raise UsageError("ViewSettings.budget_tokens is None: give Conversations a window")
    return lambda model: budget


def _matched(
    messages: tuple[Any, ...], seen: tuple[Any, ...], digests: list[str], wire: Wire
) -> int:
    """How many leading ``messages`` equal what was ``seen`` (as objects, or by fingerprint).

    Both are tuples: a tuple never equals a list, and the comparisons below must run in C.
    """
    limit = min(len(messages), len(seen))
    if messages[:limit] == seen[:limit]:  # compared in C: the usual case ...
        return limit
    start = limit - 1 if messages[: limit - 1] == seen[: limit - 1] else 0  # ... or our last reply
    for i in range(start, limit):
        if messages[i] != seen[i] and (
            chain_digest(digests[i], wire.fingerprint(messages[i])) != digests[i + 1]
        ):
            return i
    return limit
