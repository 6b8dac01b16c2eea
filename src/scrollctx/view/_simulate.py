"""A scripted long session driven through a real Event Log and working view (no model).

Each step is one exchange as an agent would produce it, with two model calls:

1. the user asks (a real user request);                       -> model call 1
2. the assistant answers with a headline and a tool call;
3. the tool returns about ``output_kb`` KiB;                    -> model call 2
4. the assistant reports the result with a headline.

Before every model call :meth:`WorkingView.ensure_budget` runs Algorithm 1 (an eviction
persists the pending turns in the transaction of its index event), the turns still pending are
persisted (so every model call waits for one commit) and :meth:`WorkingView.build` renders the
request. Full-history replay is
measured in the same run with the same counter: at each call, the system prompt, the digest and
every turn so far, unfolded. The content is deterministic for a given ``seed``.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from scrollctx.log import EventStore
from scrollctx.view._working import WorkingView
from scrollctx.view.headlines import HEADLINE_PROMPT
from scrollctx.view.tokens import MESSAGE_OVERHEAD

__all__ = ["SimulationResult", "scripted_session", "simulate"]

_TOPICS = ["flights", "hotels", "invoices", "sensor", "payroll", "orders", "tickets", "genomes"]
_METRICS = ["median latency", "total cost", "error rate", "peak load", "mean score"]
_WORDS = "alpha beta gamma delta omega sigma kappa lambda theta zeta north south east west".split()
_SYSTEM = "You are a data agent. Work in the kernel with repl_exec.\n\n" + HEADLINE_PROMPT
_TAIL_CALLS = 100


@dataclass(slots=True)
class SimulationResult:
    """Numbers from one simulated session (``to_dict`` is the ``--json`` document)."""

    steps: int
    calls: int
    output_kb: float
    budget: int
    rho: float
    evict_to: float | None
    k: int
    session_id: str
    store: str
    max_view_tokens: int
    mean_view_tokens: float
    final_view_tokens: int
    final_view_build_ms: float
    max_view_build_ms: float
    total_input_tokens: int
    full_replay_input_tokens: int
    input_token_saving_ratio: float
    history_tokens: int
    index_tokens: int
    index_blocks: int
    index_lines: int
    index_tiers: int
    evictions: int
    folds: int
    rollups: int
    headline_compliance: float | None
    elapsed_s: float
    per_call_view_tokens: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the result as JSON-able data."""
        return asdict(self)


def simulate(
    log: EventStore,
    *,
    steps: int,
    output_kb: float,
    budget: int,
    rho: float = 0.8,
    k: int = 4,
    evict_to: float | None = None,
    session_id: str = "simulation",
    seed: int = 0,
    provider: str = "openai",
) -> SimulationResult:
    """Run a scripted session of ``steps`` exchanges and measure view size against replay."""
    started = time.perf_counter()
    view = WorkingView(
        log, session_id, _SYSTEM, budget_tokens=budget, rho=rho, k=k, evict_to=evict_to
    )
    history_raw = 0
    replay_total = 0
    build_ms: list[float] = []
    for step, exchange in enumerate(scripted_session(steps, output_kb, seed)):
        for message, calls_model in exchange:
            history_raw += sum(t.raw_tokens for t in view.add(message))
            if calls_model:
                digest = f"rows: list[dict] len=50 (batch {step}); summary: dict 4 keys"
                view.ensure_budget(digest=digest)  # an eviction commits the turns with it
                view.persist()
                build_ms.append(view.build(provider).build_ms)
                replay_total += view.counter.scale(view.scaffold_raw() + history_raw)
    return _result(view, log, steps, output_kb, replay_total, history_raw, build_ms, started)


def scripted_session(
    steps: int, output_kb: float, seed: int = 0
) -> Iterator[list[tuple[dict[str, Any], bool]]]:
    """The simulated session's exchanges, one list per step: ``(message, calls_model)`` pairs
    in the order of the module docstring (deterministic for a given ``seed``).

    ``calls_model`` marks the messages after which the agent calls the model. Benchmarks
    that drive other paths (``benchmarks/bench_proxy.py``) replay the same content, so their
    numbers compare with ``scroll simulate``'s.
    """
    rng = random.Random(seed)
    for step in range(steps):
        yield _exchange(step, output_kb, rng)


def _exchange(step: int, output_kb: float, rng: random.Random) -> list[tuple[dict[str, Any], bool]]:
    topic, metric = rng.choice(_TOPICS), rng.choice(_METRICS)
    value = round(rng.uniform(1, 1000), 2)
    call_id = f"call_{step}"
    source = f"rows = load({topic!r}, batch={step})\nprint(summarize(rows, {metric!r}))"
    return [
        (
            {
                "role": "user",
                "content": f"Step {step}: analyse batch {step} of the {topic} data "
                f"and tell me the {metric}.",
            },
            True,
        ),
        (
            {
                "role": "assistant",
                "content": f"Loading batch {step} of {topic} to compute the {metric}.\n"
                f"⟦ {metric} of {topic} batch {step} | nothing verified yet | run repl_exec | "
                "in_progress ⟧",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "repl_exec",
                            "arguments": json.dumps({"source": source}),
                        },
                    }
                ],
            },
            False,
        ),
        ({"role": "tool", "tool_call_id": call_id, "content": _output(output_kb, rng)}, True),
        (
            {
                "role": "assistant",
                "content": f"The {metric} of {topic} batch {step} is {value}.\n"
                f"⟦ {metric} of {topic} batch {step} | {metric} = {value} | "
                "wait for the next request | done ⟧",
            },
            False,
        ),
    ]


def _output(output_kb: float, rng: random.Random) -> str:
    lines: list[str] = []
    size = 0
    target = int(output_kb * 1024)
    row = 0
    choice, randint, uniform = rng.choice, rng.randint, rng.random  # bound once: a hot loop
    while size < target:
        words = f"{choice(_WORDS)} {choice(_WORDS)} {choice(_WORDS)} {choice(_WORDS)}"
        line = f"row {row:05d} | {words} | {randint(0, 99999):>6} | {uniform():.4f}"
        lines.append(line)
        size += len(line) + 1
        row += 1
    return "\n".join(lines)


def _result(
    view: WorkingView,
    log: EventStore,
    steps: int,
    output_kb: float,
    replay_total: int,
    history_raw: int,
    build_ms: list[float],
    started: float,
) -> SimulationResult:
    metrics = view.metrics
    calls = metrics.call_tokens
    index = view.index
    tail = build_ms[-_TAIL_CALLS:] or [0.0]
    return SimulationResult(
        steps=steps,
        calls=metrics.calls,
        output_kb=output_kb,
        budget=view.budget_tokens,
        rho=view.rho,
        evict_to=view.evict_to,
        k=index.k,
        session_id=view.session_id,
        store=str(log.path.parent),
        max_view_tokens=metrics.max_view_tokens,
        mean_view_tokens=round(statistics.fmean(calls), 1) if calls else 0.0,
        final_view_tokens=calls[-1] if calls else 0,
        final_view_build_ms=round(statistics.median(tail), 3),
        max_view_build_ms=round(max(build_ms, default=0.0), 3),
        total_input_tokens=metrics.total_input_tokens,
        full_replay_input_tokens=replay_total,
        input_token_saving_ratio=round(replay_total / max(1, metrics.total_input_tokens), 2),
        history_tokens=view.counter.scale(history_raw),
        index_tokens=view.counter.count(view.index_text()) + MESSAGE_OVERHEAD,
        index_blocks=index.block_count(),
        index_lines=len(index.spans()),
        index_tiers=len(index.tiers),
        evictions=metrics.evictions,
        folds=metrics.folds,
        rollups=metrics.rollups,
        headline_compliance=metrics.headline_compliance,
        elapsed_s=round(time.perf_counter() - started, 2),
        per_call_view_tokens=list(calls),
    )
