"""Every system end to end on real slices of the data, played by a scripted model over HTTP.

The scripted model (``ScriptedModelServer``, a test double) answers agent, judge and
summarizer requests from what each request contains: the agent recalls once with the tools it
was given and then submits the scripted answer; the judge says yes when the reference answer
is in the response; the summarizer returns a fixed summary.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bench_servers import ScriptedModelServer
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import register, resolve_model, unregister
from scrollctx.agent.backends._openai import OpenAIBackend
from scrollctx.bench._histories import BaseStore
from scrollctx.bench._judge import Judge
from scrollctx.bench._questions import Question, beam_questions, longmemeval_questions
from scrollctx.bench._results import ResultFile
from scrollctx.bench._runner import run_questions
from scrollctx.bench._systems import SYSTEMS, Attempt, RunSettings, System, get_system
from scrollctx.view import INDEX_HEADER

FIXTURES = Path(__file__).resolve().parents[1] / "ingest" / "fixtures"
LME = FIXTURES / "longmemeval_mini.json"
SUMMARY = "Summary: the user adopted Biscuit and took a pottery class."
_RECALL = {
    "recall_history_python": {
        "source": "rows = ms.search('pottery', kind='conversation', k=3)\nprint(len(rows))"
    },
    "ms_search": {"query": "pottery", "kind": "conversation", "k": 3},
    "repl_exec": {
        "source": "import json\nrows = [json.loads(l) for l in open('history.jsonl')]\n"
        "print('rows', len(rows))"
    },
}


def scripted_model(answer: str) -> Callable[[RecordedRequest], ScriptedReply]:
    def respond(request: RecordedRequest) -> ScriptedReply:
        body: dict[str, Any] = request.body
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        prompt = str(body["messages"][-1]["content"])
        if not tools:
            return _judge_or_summarize(prompt)
        if not any(m["role"] == "tool" for m in body["messages"]):
            for name in _RECALL:  # in order of preference
                if name in tools:
                    return ScriptedOpenAIServer.tool_calls_reply([(name, _RECALL[name])])
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": answer})])

    return respond


def _judge_or_summarize(prompt: str) -> ScriptedReply:
    if prompt.startswith("You keep the memory"):
        return ScriptedOpenAIServer.text_reply(SUMMARY)
    if "Explanation: " in prompt:  # abstention: right when the answer abstains
        return ScriptedOpenAIServer.text_reply("yes" if "not mentioned" in prompt else "no")
    reference = prompt.split("Correct answer: ")[1].split("\n\n")[0].lower()
    response = prompt.split("Assistant's response: ")[1].split("\n\n")[0].lower()
    return ScriptedOpenAIServer.text_reply("yes" if reference in response else "no")


def _settings(server: ScriptedModelServer) -> RunSettings:
    return RunSettings(model="openai:agent", environ=server.environ, max_steps=4)


def _judge(server: ScriptedModelServer) -> Judge:
    return Judge(resolve_model("openai:judge", environ=server.environ))


def _question(tmp_path: Path) -> Question:
    return longmemeval_questions(LME, tmp_path / "data", limit=1)[0]


def _agent_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.body.get("tools")]


@pytest.mark.parametrize("system_name", SYSTEMS)
def test_every_system_answers_and_is_scored(
    system_name: str, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    model_server.respond = scripted_model("It was 12 days.")
    question = _question(tmp_path)
    system = get_system(system_name, _settings(model_server), tmp_path / "work")
    results = ResultFile(tmp_path / "results.jsonl")
    summary = run_questions([question], system, results, judge=_judge(model_server), size="S")
    assert summary.statuses == {"scored": 1}
    (record,) = results.records()
    assert record["system"] == system_name and record["answer"] == "It was 12 days."
    assert record["scores"] == {"judge": 1.0}
    assert record["tokens_in"] > 0 and record["turns"] >= 1
    assert record["corpus_share"] == record["tokens_in"] / record["corpus_tokens"] > 0
    _check_system_shape(system_name, _agent_requests(model_server), record)


def _check_system_shape(name: str, requests: list[dict[str, Any]], record: dict[str, Any]) -> None:
    first = requests[0]
    tools = {t["function"]["name"] for t in first["tools"]}
    text = json.dumps(first["messages"])
    observation = next((m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"), "")
    expected_tools = {
        "scroll": {"repl_exec", "recall_history_python", "submit_answer"},
        "scroll-noindex": {"repl_exec", "recall_history_python", "submit_answer"},
        "lossy-summary": {"repl_exec", "recall_history_python", "submit_answer"},
        "scroll-norepl": {"ms_search", "ms_expand", "ms_sql_query", "submit_answer"},
        "retrieval": {"ms_search", "submit_answer"},
        "summarizing": {"ms_search", "submit_answer"},
        "codeact": {"repl_exec", "submit_answer"},
        "summary": {"submit_answer"},
        "longcontext": {"submit_answer"},
    }[name]
    assert tools == expected_tools
    carries_index = name in ("scroll", "scroll-norepl", "lossy-summary")
    assert (INDEX_HEADER[:40] in text) == carries_index
    # Fair comparison: the prompts and the index name only tools this system has.
    for missing in {"repl_exec", "recall_history_python", "ms_search", "ms_expand"} - tools:
        assert missing not in text, (name, missing)
    assert (re.search(r"`ms`|\bms\.\w", text) is not None) == ("recall_history_python" in tools)
    assert ("eviction index" in text) == carries_index
    if name in ("scroll", "scroll-noindex"):
        assert observation.startswith("stdout:\n1")  # one row mentions pottery
    if name == "lossy-summary":
        assert "2023-05-01] Summary: the user adopted" in text  # index lines are summaries
        assert record["ingest_tokens_in"] > 0
    if name in ("scroll-norepl", "retrieval", "summarizing"):
        assert "pottery class" in observation
    if name == "codeact":
        assert "rows 9" in observation  # 9 turns in the fixture's first question
    if name == "summary":
        assert SUMMARY in text and record["ingest_tokens_in"] > 0
    if name == "longcontext":
        assert "my first pottery class" in text


def test_a_wrong_answer_scores_0(model_server: ScriptedModelServer, tmp_path: Path) -> None:
    model_server.respond = scripted_model("It was 3 weeks.")
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    results = ResultFile(tmp_path / "results.jsonl")
    run_questions([_question(tmp_path)], system, results, judge=_judge(model_server))
    assert results.records()[0]["scores"] == {"judge": 0.0}


def test_results_resume_and_errors_run_again(
    model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    questions = longmemeval_questions(LME, tmp_path / "data")
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    path = tmp_path / "results.jsonl"
    model_server.respond = lambda request: ScriptedReply(
        status=401, body={"error": {"message": "bad key", "type": "auth"}}
    )
    first = run_questions(questions[:1], system, ResultFile(path), judge=_judge(model_server))
    assert first.statuses == {"error": 1}
    assert ResultFile(path).records()[0]["error"].startswith("MissingCredentials")
    model_server.respond = scripted_model("12 days")
    second = run_questions(
        questions, system, ResultFile(path), judge=_judge(model_server), workers=2
    )
    assert (second.skipped, second.statuses) == (0, {"scored": 3})
    model_server.reset()
    third = run_questions(questions, system, ResultFile(path), judge=_judge(model_server))
    assert (third.skipped, third.statuses, model_server.requests) == (3, {}, [])
    records = ResultFile(path).records()
    assert len(records) == 4 and len({r["session_id"] for r in records[1:]}) == 3


def test_beam_10m_questions_are_refused_without_chats(
    model_server: ScriptedModelServer, shared_data: Path, tmp_path: Path
) -> None:
    from scrollctx.errors import UsageError

    questions = beam_questions(shared_data / "beam" / "chats", "10M", limit=2)
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    with pytest.raises(UsageError, match="BEAM 10M ships questions only"):
        run_questions(questions, system, ResultFile(tmp_path / "r.jsonl"), judge=None)
    assert not (tmp_path / "r.jsonl").exists()


def test_locomo_run_scores_f1_without_a_judge_and_j_with_one(
    model_server: ScriptedModelServer, shared_data: Path, tmp_path: Path
) -> None:
    from scrollctx.bench._questions import locomo_questions

    questions = locomo_questions(
        shared_data / "locomo" / "locomo10.json", tmp_path / "data", categories=["4"], limit=1
    )
    gold = questions[0].answer
    model_server.respond = lambda request: (
        ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": gold})])
        if request.body.get("tools")
        else ScriptedOpenAIServer.text_reply("CORRECT")
    )
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    plain = ResultFile(tmp_path / "plain.jsonl")
    run_questions(questions, system, plain, judge=None)
    assert plain.records()[0]["scores"] == {"f1": 1.0}
    judged = ResultFile(tmp_path / "judged.jsonl")
    run_questions(questions, system, judged, judge=_judge(model_server))
    assert judged.records()[0]["scores"] == {"f1": 1.0, "j": 1.0}
    assert judged.records()[0]["corpus_tokens"] > 10_000  # conv-26 has 19 sessions
    assert judged.records()[0]["judge_settings"]["beam_ordering_match"] == "pairwise"


def test_each_probe_runs_in_its_own_copy_of_the_history_store(
    model_server: ScriptedModelServer, shared_data: Path, tmp_path: Path
) -> None:
    """Two questions about one conversation: each probe counts the rows of its store at the
    same step, so they count the same only if neither sees the other's turns."""
    from scrollctx.bench._questions import locomo_questions

    questions = locomo_questions(
        shared_data / "locomo" / "locomo10.json", tmp_path / "data", categories=["4"], limit=2
    )
    assert questions[0].history.key == questions[1].history.key
    count = "print(ms.sql_query('SELECT count(*) AS n FROM hist.conversation_history')[0]['n'])"

    def respond(request: RecordedRequest) -> ScriptedReply:
        if not any(m["role"] == "tool" for m in request.body["messages"]):
            call = ("recall_history_python", {"source": count})
            return ScriptedOpenAIServer.tool_calls_reply([call])
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": "x"})])

    model_server.respond = respond
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    run_questions(questions, system, ResultFile(tmp_path / "r.jsonl"), judge=None, workers=1)
    counts = [
        int(re.match(r"stdout:\n(\d+)", m["content"]).group(1))  # type: ignore[union-attr]
        for request in model_server.requests
        for m in request.body["messages"][-1:]
        if m["role"] == "tool"
    ]
    assert len(counts) == 2 and counts[0] == counts[1] > 419  # conv-26 has 419 turns


def test_locomo_no_answer_counts_as_wrong_in_j_and_an_unreadable_j_keeps_the_f1(
    model_server: ScriptedModelServer, shared_data: Path, tmp_path: Path
) -> None:
    """The J mean counts runs that ended without an answer as wrong (the published J runs
    judge whatever the system said, so no answer is a wrong answer); a J reply that cannot be
    read leaves out the J of that record only, never its F1."""
    from scrollctx.bench._questions import locomo_questions
    from scrollctx.bench._tables import build_sections

    questions = locomo_questions(
        shared_data / "locomo" / "locomo10.json", tmp_path / "data", categories=["4"], limit=2
    )
    gold = {q.question: q.answer for q in questions}

    def respond(request: RecordedRequest) -> ScriptedReply:
        if not request.body.get("tools"):
            return ScriptedOpenAIServer.text_reply("I cannot tell.")  # no label at all
        asked = " ".join(str(m.get("content")) for m in request.body["messages"])
        if questions[0].question in asked:  # the first never answers: the step limit ends it
            return ScriptedOpenAIServer.tool_calls_reply([("repl_exec", {"source": "1"})])
        answer = gold[questions[1].question]
        return ScriptedOpenAIServer.tool_calls_reply([("submit_answer", {"answer": answer})])

    model_server.respond = respond
    system = get_system("scroll", _settings(model_server), tmp_path / "work")
    results = ResultFile(tmp_path / "r.jsonl")
    run_questions(questions, system, results, judge=_judge(model_server))
    silent, answered = sorted(results.records(), key=lambda r: r["qid"] != questions[0].qid)
    assert silent["run_status"] == "failed" and silent["scores"] == {"f1": 0.0, "j": 0.0}
    assert answered["status"] == "scored" and answered["scores"] == {"f1": 1.0}
    assert set(answered["malformed"]) == {"j"}
    (section,) = build_sections(results.records())
    assert section.accuracy["overall"]["scroll"] == 50.0  # both F1s: (0 + 1) / 2
    assert section.accuracy["J (1-4)"]["scroll"] == 0.0  # the silent run's 0; the other left out
    assert section.counts["J (1-4)"]["scroll"] == 1
    assert section.status["scroll"]["malformed"] == 1


_INDEX_CHECK = (
    "print(ms.index()['tiers'] != [], len(ms.sql_query(\"SELECT seq FROM "
    "hist.conversation_history WHERE kind = 'eviction_index'\")), "
    "len(ms.search('pottery', kind='conversation')))"
)


def _filling_model(answer: str) -> Callable[[RecordedRequest], ScriptedReply]:
    """Five cells that print a lot (the view must fold the older ones), then the index check,
    then submit."""
    cells = [f"print('filler{n} ' * 1000)" for n in range(5)] + [_INDEX_CHECK]
    asked: list[int] = []

    def respond(request: RecordedRequest) -> ScriptedReply:
        if not request.body.get("tools"):
            return _judge_or_summarize(str(request.body["messages"][-1]["content"]))
        asked.append(1)
        # No usage in the replies: the view's counts stay uncalibrated, the same in every run.
        if len(asked) <= len(cells):
            source = cells[len(asked) - 1]
            call = ("repl_exec", {"source": source})
            return ScriptedOpenAIServer.tool_calls_reply([call], usage=None)
        call = ("submit_answer", {"answer": answer})
        return ScriptedOpenAIServer.tool_calls_reply([call], usage=None)

    return respond


def _run_filling(name: str, server: ScriptedModelServer, tmp_path: Path) -> dict[str, Any]:
    server.reset()
    server.respond = _filling_model("12 days")
    settings = RunSettings(
        model="openai:agent", environ=server.environ, max_steps=8, budget_tokens=14_000
    )
    system = get_system(name, settings, tmp_path / name)
    results = ResultFile(tmp_path / f"{name}.jsonl")
    run_questions([_question(tmp_path)], system, results, judge=_judge(server))
    (record,) = results.records()
    assert record["answer"] == "12 days"
    return {"record": record, "requests": _agent_requests(server)}


def _without_index(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, content) of the body messages, seq numbers blanked (the stores differ by the
    index events), the index text (it opens the first user message) and the output of the cell
    that inspects the index left out."""
    kept = []
    for message in messages[1:]:
        content = str(message.get("content"))
        if content.startswith(INDEX_HEADER.split(".")[0]):
            content = content[content.index("\n\nHow many days") + 2 :]
        if re.match(r"stdout:\n(True|False) \d+ \d+\n", content + "\n"):
            content = "(the index check's output)"
        content = re.sub(r"\bseq[ =]\d+", "seq N", content)
        kept.append((message["role"], re.sub(r"expand\(\d+\)", "expand(N)", content)))
    return kept


def test_the_noindex_ablation_differs_from_scroll_only_in_the_index(
    model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    """The ablation keeps Algorithm 1 (the big results are folded to seq pointers, not dropped
    by a plain window) and loses only the index: no index message, no index in ms.index() or
    in SQL; every other message of every call is the same as the full system's."""
    scroll = _run_filling("scroll", model_server, tmp_path)
    noindex = _run_filling("scroll-noindex", model_server, tmp_path)
    assert len(scroll["requests"]) == len(noindex["requests"])
    for with_index, without in zip(scroll["requests"], noindex["requests"], strict=True):
        assert _without_index(with_index["messages"]) == _without_index(without["messages"])
        assert any(str(m["content"]).startswith("[eviction index]") for m in with_index["messages"])
        assert not any("[eviction index]" in str(m["content"]) for m in without["messages"])
    last = noindex["requests"][-1]["messages"]
    observations = [str(m["content"]) for m in last if m["role"] == "tool"]
    # no index, no eviction_index row; search works
    assert observations[-1].startswith("stdout:\nFalse 0 1\n\n[namespace digest]")
    assert observations[0].startswith("[tool output folded")  # a seq pointer (Algorithm 1)
    assert "filler4 filler4" in observations[4]  # the newest results are protected
    full = [str(m["content"]) for m in scroll["requests"][-1]["messages"] if m["role"] == "tool"]
    assert re.match(r"stdout:\nTrue \d+ 1\n\n\[namespace digest\]", full[-1])
    system_with = scroll["requests"][0]["messages"][0]["content"]
    system_without = noindex["requests"][0]["messages"][0]["content"]
    assert "eviction index" in system_with and "eviction index" not in system_without


class _FixedAttempt(System):
    """A system whose every answer is a given attempt (to test how the runner classifies it)."""

    name = "fixed"

    def __init__(self, attempt: Attempt, work_dir: Path) -> None:
        super().__init__(RunSettings(model="unused"), work_dir)
        self.attempt = attempt

    def answer(self, question: Question, base: BaseStore, probe_dir: Path) -> Attempt:
        return self.attempt


def _failed(failure: str, failure_type: str) -> Attempt:
    return Attempt(None, "failed", failure, failure_type, 5, 1, 1, 0.1, None, "s")


def test_the_runner_classifies_a_failure_by_its_type_not_its_text(tmp_path: Path) -> None:
    question = longmemeval_questions(LME, tmp_path / "data", limit=1)[0]
    # Neither run reaches the judge: a run without an answer is never sent to it.
    judge_stub = Judge(resolve_model("openai:judge", environ={"OPENAI_API_KEY": "sk-unused"}))
    outage = _FixedAttempt(_failed("the server said no", "BackendUnavailable"), tmp_path / "w")
    run_questions([question], outage, ResultFile(tmp_path / "a.jsonl"), judge=judge_stub)
    misleading = _FixedAttempt(
        _failed("RateLimited: words that look like an outage", "step_limit"), tmp_path / "w"
    )
    run_questions([question], misleading, ResultFile(tmp_path / "b.jsonl"), judge=judge_stub)
    judge_stub.backend.close()
    (down,) = ResultFile(tmp_path / "a.jsonl").records()
    (gave_up,) = ResultFile(tmp_path / "b.jsonl").records()
    assert (down["status"], down["failure_type"]) == ("error", "BackendUnavailable")
    assert (gave_up["status"], gave_up["failure_type"]) == ("scored", "step_limit")
    assert gave_up["scores"] == {"judge": 0.0}


class _CountedBackend(OpenAIBackend):
    """The OpenAI backend, counting how many are built and closed."""

    name = "counted"
    made: list[_CountedBackend] = []
    lock = threading.Lock()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closed = False
        with self.lock:
            self.made.append(self)

    def close(self) -> None:
        self.closed = True
        super().close()


@pytest.mark.parametrize("workers", [1, 2])
def test_one_backbone_per_worker_serves_every_question(
    workers: int, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    model_server.respond = scripted_model("12 days")
    questions = longmemeval_questions(LME, tmp_path / "data")
    assert len(questions) == 3
    _CountedBackend.made.clear()
    register("counted", _CountedBackend)
    try:
        settings = RunSettings(model="counted:agent", environ=model_server.environ, max_steps=4)
        system = get_system("lossy-summary", settings, tmp_path / "work")
        summary = run_questions(
            questions, system, ResultFile(tmp_path / "r.jsonl"), judge=_judge(model_server),
            workers=workers,
        )  # fmt: skip
    finally:
        unregister("counted")
    assert summary.statuses == {"scored": 3}
    # The summarizer and every agent of a worker share its backbone; the run closes them.
    assert 1 <= len(_CountedBackend.made) <= workers
    assert all(backend.closed for backend in _CountedBackend.made)
