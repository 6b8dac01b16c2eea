"""What ``scroll serve`` costs per request, and what it saves in upstream input tokens.

Run: ``.venv/bin/python benchmarks/bench_proxy.py [--pairs 200] [--logged 2000] [--steps 1000]
[--output-kb 8] [--budget 32000] [--before SRC] [--json FILE]``

``--before SRC`` also runs the ``scroll serve`` of another scrollctx source tree (``SRC`` is its
``src`` folder: a checkout of an earlier commit) beside this one, over its own store and
upstream double, the two proxies' pairs interleaved in the same run, so a before/after
comparison shares the machine's load.

Everything is real but the model, each in its own process: a client (httpx, as the SDKs use
it) resending its whole history on every request; ``scroll serve`` itself (the installed
command, ``--sandbox off``: no cell runs here) over a real Event Log; and an upstream test
double (:class:`InstantUpstream`, an OpenAI-compatible app that answers at once and, in the
agent session, counts the tokens of every request it gets). The baseline is the same client
calling that upstream directly, measured in the same run.

1. **Added latency, no eviction**: one conversation, a new user message per request; each
   request is sent to the upstream directly and through the proxy, alternating which goes
   first. Added latency = proxy time - direct time, per pair (min / median / max). Beside it,
   the proxy process's CPU time per request over the same pairs (user + system, from
   ``/proc``): what the proxy adds that other processes on a busy machine do not inflate
   (the disk flush of each request's messages is waiting, not CPU).
2. **Added latency with N logged turns**: the same, once the conversation has ``--logged``
   turns in the log and the view evicts (budget ``--budget``): the client resends them all.
3. **Input tokens of an agent session**: ``--steps`` agent steps as in ``scroll simulate``
   (a request, a tool call, its ``--output-kb`` KiB result, an answer: two model calls; the
   requests and results are simulate's own), the client replaying its whole history; total
   input tokens the upstream received through the proxy against what direct replay sends (the
   same client, the same estimate of tokens).

Numbers only; nothing is asserted. Port 0 everywhere; stores in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from scrollctx.log import EventLog
from scrollctx.serve._network import listen
from scrollctx.view import estimate_tokens, scripted_session

SCROLL = Path(sys.executable).with_name("scroll")

WORDS = "alpha beta gamma delta river stone north south lamp table orbit cedar".split()


def text(words: int, salt: int) -> str:
    """Deterministic prose of about ``words`` words."""
    return " ".join(WORDS[(salt * 7 + i * 5) % len(WORDS)] for i in range(words))


def request_tokens(messages: list[dict[str, Any]]) -> int:
    """Input tokens of one request, the same estimate for both paths."""
    total = 0
    for message in messages:
        total += 4 + estimate_tokens(str(message.get("content") or ""))
        for call in message.get("tool_calls") or []:
            total += estimate_tokens(json.dumps(call["function"]))
    return total


class InstantUpstream:
    """Test double for the model: an OpenAI-compatible app that answers at once.

    A request whose last message is a user turn gets a ``run`` tool call while :attr:`agent`
    is on (else a short answer); one after a tool result gets a final answer with a headline.
    While :attr:`agent` is on, every request's input tokens are added to :attr:`tokens`
    (``GET /stats`` reads them; ``POST /agent`` turns the mode on and zeroes the count).
    """

    def __init__(self) -> None:
        self.agent = False
        self.tokens = 0
        self.calls = 0

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        messages = body["messages"]
        self.calls += 1
        prompt = request_tokens(messages) if self.agent else 0
        self.tokens += prompt
        step = self.calls
        if self.agent and messages[-1]["role"] == "user":
            call = {"name": "run", "arguments": json.dumps({"step": step})}
            message = {"role": "assistant", "content": "Running it.",
                       "tool_calls": [{"id": f"call_{step}", "type": "function",
                                       "function": call}]}  # fmt: skip
        else:
            headline = f"⟦ step {step} | result {step} | next | done ⟧"
            message = {"role": "assistant", "content": f"Done {step}.\n{headline}"}
        reported = prompt or 50 * len(messages)  # for the view's calibration: a plausible count
        return JSONResponse({
            "id": f"c{step}", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if "tool_calls" in message else "stop"}],
            "usage": {"prompt_tokens": reported, "completion_tokens": 8,
                      "total_tokens": reported + 8}})  # fmt: skip

    async def stats(self, request: Request) -> JSONResponse:
        return JSONResponse({"tokens": self.tokens, "calls": self.calls})

    async def start_agent(self, request: Request) -> JSONResponse:
        self.agent, self.tokens = True, 0
        return JSONResponse({})


def run_upstream() -> None:
    """The upstream double's process: serve on a loopback port, print its URL, run."""
    double = InstantUpstream()
    app = Starlette(routes=[
        Route("/v1/chat/completions", double.chat, methods=["POST"]),
        Route("/stats", double.stats), Route("/agent", double.start_agent, methods=["POST"]),
    ])  # fmt: skip
    listener = listen("127.0.0.1", 0)
    print(f"http://127.0.0.1:{listener.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


def client() -> httpx2.Client:
    """The client's HTTP: the SDKs' library, answers not held by Nagle."""
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return httpx2.Client(transport=httpx2.HTTPTransport(socket_options=nodelay), timeout=300)


class Bench:
    """An upstream double and ``scroll serve`` in front of it (processes), and one client."""

    def __init__(self, folder: Path, budget: int, source: Path | None = None) -> None:
        self.store = folder / "store"
        folder.mkdir()
        self._upstream = subprocess.Popen([sys.executable, __file__, "--upstream-double"],
                                          stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert self._upstream.stdout is not None
        self.upstream_url = self._upstream.stdout.readline().strip()
        command = [str(SCROLL), "serve", "--upstream", f"{self.upstream_url}/v1", "--port", "0",
                   "--sandbox", "off", "--budget-tokens", str(budget),
                   "--store", str(self.store)]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(source)} if source else None
        self._proxy = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        assert self._proxy.stderr is not None
        line = self._proxy.stderr.readline()
        found = re.search(r"point clients at (http://\S+)/v1", line)
        if found is None:
            raise RuntimeError(f"scroll serve did not start: {line}")
        self.proxy_url = found.group(1)
        self.http = client()

    def send(self, url: str, messages: list[dict[str, Any]]) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        response = self.http.post(f"{url}/v1/chat/completions",
                                  json={"model": "m", "messages": messages})  # fmt: skip
        elapsed = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        return elapsed, response.json()["choices"][0]["message"]

    def proxy_cpu_s(self) -> float:
        """CPU seconds (user + system) the proxy process has used so far (Linux ``/proc``)."""
        fields = Path(f"/proc/{self._proxy.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def evictions(self) -> int:
        with EventLog.open(self.store / "history.db") as log:
            rows = log.execute(
                "SELECT count(*) FROM conversation_history WHERE kind = 'eviction_index'"
            )
            return int(rows[0][0])

    def close(self) -> None:
        self.http.close()
        for process in (self._proxy, self._upstream):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            for pipe in (process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


def latency(sides: list[tuple[Bench, list[dict[str, Any]]]], pairs: int) -> list[dict[str, Any]]:
    """Alternate direct and proxied requests, each with one new user message; added latency.

    ``sides``: the proxy (and the one ``--before`` names) with its conversation; each pair
    alternates which goes first, direct or proxy, and which side.
    """
    times: list[dict[str, list[float]]] = [{"direct": [], "proxy": []} for _ in sides]
    cpu_before = [bench.proxy_cpu_s() for bench, _ in sides]
    for pair in range(pairs):
        order = ("direct", "proxy") if pair % 2 == 0 else ("proxy", "direct")
        for side in range(len(sides))[:: 1 if pair % 2 == 0 else -1]:
            bench, history = sides[side]
            history.append({"role": "user", "content": text(40, len(history))})
            for path in order:
                url = bench.upstream_url if path == "direct" else bench.proxy_url
                elapsed, reply = bench.send(url, history)
                times[side][path].append(elapsed)
                if path == "proxy":
                    history.append({"role": "assistant", "content": reply["content"]})
    rows = []
    for (bench, history), took, cpu in zip(sides, times, cpu_before, strict=True):
        added = [p - d for p, d in zip(took["proxy"], took["direct"], strict=True)]
        rows.append({"direct_ms": summary(took["direct"]), "proxy_ms": summary(took["proxy"]),
                     "added_ms": summary(added),
                     "proxy_cpu_ms_per_request": (bench.proxy_cpu_s() - cpu) * 1000 / pairs,
                     "turns_at_end": len(history)})  # fmt: skip
    return rows


def fill(bench: Bench, history: list[dict[str, Any]], turns: int) -> None:
    """Log ``turns`` turns through the proxy (not timed)."""
    while len(history) < turns:
        history.append({"role": "user", "content": text(40, len(history))})
        _, reply = bench.send(bench.proxy_url, history)
        history.append({"role": "assistant", "content": reply["content"]})


def agent_session(bench: Bench, steps: int, output_kb: int) -> dict[str, Any]:
    """The client runs an agent: requests, tool calls, big results; tokens both ways.

    The user requests and tool results are ``scroll simulate``'s (:func:`scripted_session`),
    so the saving compares with its ``input_token_saving_ratio`` for the same arguments.
    """
    bench.http.post(f"{bench.upstream_url}/agent").raise_for_status()
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    replay, sent = 0, request_tokens(history)  # direct replay sends all of history each time
    started = time.perf_counter()

    def add(message: dict[str, Any]) -> None:
        nonlocal sent
        history.append(message)
        sent += request_tokens([message])

    for exchange in scripted_session(steps, output_kb):
        (user, _), (_, _), (result, _), (_, _) = exchange
        add(user)
        for _ in range(2):
            replay += sent
            _, reply = bench.send(bench.proxy_url, history)
            add({k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})
            for call in reply.get("tool_calls") or []:
                add({"role": "tool", "tool_call_id": call["id"], "content": result["content"]})
    proxied = bench.http.get(f"{bench.upstream_url}/stats").json()["tokens"]
    return {"steps": steps, "model_calls": 2 * steps, "turns": len(history) - 1,
            "history_tokens": sent, "proxied_input_tokens": proxied,
            "direct_replay_input_tokens": replay, "saving": replay / proxied,
            "wall_s": time.perf_counter() - started}  # fmt: skip


def summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def shown(row: dict[str, float]) -> str:
    return f"{row['min']:.2f} / {row['median']:.2f} / {row['max']:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--logged", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--output-kb", type=int, default=8)
    parser.add_argument("--budget", type=int, default=32_000)
    parser.add_argument("--before", type=Path, default=None, metavar="SRC")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--upstream-double", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.upstream_double:
        run_upstream()
        return 0
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as folder:
        root = Path(folder)
        sources = {"": None, " (before)": args.before} if args.before else {"": None}
        for name, logged, budget in (("no_eviction", 20, 10_000_000),
                                     ("logged", args.logged, args.budget)):  # fmt: skip
            sides = []
            for tag, source in sources.items():
                bench = Bench(root / f"{name}{tag.strip(' ()')}", budget, source)
                history: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
                fill(bench, history, logged)
                sides.append((bench, history))
            for (bench, _), tag, row in zip(sides, sources, latency(sides, args.pairs),
                                            strict=True):  # fmt: skip
                bench.close()
                results[name + tag] = row
                row["evictions"] = bench.evictions()
                print(f"{name}{tag}: {row['turns_at_end']} turns at the end, {row['evictions']} "
                      f"evictions; ms min/median/max: direct {shown(row['direct_ms'])}, proxy "
                      f"{shown(row['proxy_ms'])}, added {shown(row['added_ms'])}; proxy CPU "
                      f"{row['proxy_cpu_ms_per_request']:.2f} ms/request; "
                      f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        bench = Bench(root / "agent", args.budget)
        results["agent"] = agent = agent_session(bench, args.steps, args.output_kb)
        bench.close()
        print(f"agent session: {agent['steps']} steps ({agent['model_calls']} model calls, "
              f"{agent['turns']} turns, {agent['history_tokens']:,} tokens of history), budget "
              f"{args.budget:,}; input tokens {agent['proxied_input_tokens']:,} through the proxy "
              f"vs {agent['direct_replay_input_tokens']:,} direct replay -> "
              f"{agent['saving']:.1f}x fewer; wall {agent['wall_s']:.1f} s")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
