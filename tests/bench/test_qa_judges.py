"""The judges over real HTTP: a scripted OpenAI-compatible server (test double) plays the judge.

The scripted judge answers from the request it receives (``enqueue(callable)``), so these tests
check the real plumbing: the prompt the judge is shown, the reply it sends, how it is parsed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import resolve_model
from scrollctx.bench._judge import Judge, parse_json_reply, parse_yes_no
from scrollctx.bench._questions import beam_questions, locomo_questions
from scrollctx.bench._scoring import score_answer
from scrollctx.errors import UsageError


def _judge(server: ScriptedOpenAIServer, **options: object) -> Judge:
    return Judge(resolve_model("openai:judge-model", environ=server.environ), **options)  # type: ignore[arg-type]


def _prompt(request: RecordedRequest) -> str:
    return str(request.body["messages"][-1]["content"])


def _field(prompt: str, name: str) -> str:
    match = re.search(rf"{name}: (.*?)\n\n", prompt, re.DOTALL)
    assert match is not None, prompt
    return match.group(1)


def substring_judge(request: RecordedRequest) -> ScriptedReply:
    """Says yes when the response contains the reference answer (lower-cased)."""
    prompt = _prompt(request)
    answer = _field(prompt, "Reference answer").lower()
    response = _field(prompt, "Assistant's response").lower()
    return ScriptedOpenAIServer.text_reply("yes" if answer in response else "no")


def test_longmemeval_correct_scores_1_and_wrong_scores_0(
    openai_server: ScriptedOpenAIServer,
) -> None:
    judge = _judge(openai_server)
    openai_server.enqueue(substring_judge, substring_judge)
    right = judge.longmemeval(
        "How many days?", "12 days", "It took 12 days.", "multi-session", "q1"
    )
    wrong = judge.longmemeval(
        "How many days?", "12 days", "It took 3 weeks.", "multi-session", "q1"
    )
    assert (right.score, wrong.score) == (1.0, 0.0)
    body = openai_server.requests[0].body
    assert body["model"] == "judge-model" and body["temperature"] == 0.0


def test_longmemeval_prompt_follows_the_question_type(openai_server: ScriptedOpenAIServer) -> None:
    judge = _judge(openai_server)
    for _ in range(4):
        openai_server.enqueue_text("Yes.")
    judge.longmemeval("q", "a", "r", "temporal-reasoning", "t1")
    judge.longmemeval("q", "a", "r", "knowledge-update", "k1")
    judge.longmemeval("q", "a", "r", "single-session-preference", "p1")
    judge.longmemeval("q", "a", "r", "knowledge-update", "k2_abs")
    prompts = [_prompt(r) for r in openai_server.requests]
    assert "off by one" in prompts[0]
    assert "older information" in prompts[1]
    assert "Rubric" in prompts[2]
    assert "cannot be answered" in prompts[3]


def test_malformed_judge_reply_is_recorded_not_scored(openai_server: ScriptedOpenAIServer) -> None:
    judge = _judge(openai_server)
    openai_server.enqueue_text("<think>yes or no?</think> I am unsure.")
    verdict = judge.longmemeval("q", "a", "r", "multi-session", "q1")
    assert verdict.score is None
    assert verdict.malformed == "the reply says neither yes nor no"
    assert verdict.replies == ("<think>yes or no?</think> I am unsure.",)


def test_reply_parsers() -> None:
    assert parse_yes_no("<think>no no</think>\nYes, it matches.") is True
    assert parse_yes_no("NO") is False
    assert parse_yes_no("yesterday") is None
    assert parse_json_reply('```json\n{"score": 0.5, "reason": "x"}\n```') == {
        "score": 0.5,
        "reason": "x",
    }
    assert parse_json_reply('{not json} then {"a": 1}') == {"a": 1}
    assert parse_json_reply("nothing here") is None


def rubric_judge(scores: dict[str, object]) -> object:
    """Replies with the scripted score for the criterion named in the prompt."""

    def respond(request: RecordedRequest) -> ScriptedReply:
        criterion = _field(_prompt(request), "Criterion")
        reply = scores[criterion]
        text = reply if isinstance(reply, str) else json.dumps({"score": reply, "reason": "ok"})
        return ScriptedOpenAIServer.text_reply(text)

    return respond


def test_beam_rubric_mean_with_and_without_the_integer_cast(
    openai_server: ScriptedOpenAIServer,
) -> None:
    scores = {"states A": 1.0, "states B": 0.5}
    openai_server.enqueue(rubric_judge(scores), rubric_judge(scores))
    cast = _judge(openai_server).beam_rubric("q", ["states A", "states B"], "A and sort of B")
    assert cast.score == 0.5  # int(1.0), int(0.5) = 1, 0
    assert cast.detail["uncast"] == 0.75
    openai_server.enqueue(rubric_judge(scores), rubric_judge(scores))
    exact = _judge(openai_server, beam_integer_cast=False).beam_rubric(
        "q", ["states A", "states B"], "A and sort of B"
    )
    assert exact.score == 0.75


def test_beam_rubric_malformed_item(openai_server: ScriptedOpenAIServer) -> None:
    scores: dict[str, object] = {"states A": 1.0, "states B": '{"score": 0.7}'}
    openai_server.enqueue(rubric_judge(scores), rubric_judge(scores))
    verdict = _judge(openai_server).beam_rubric("q", ["states A", "states B"], "r")
    assert verdict.score is None
    assert verdict.malformed == "item 2: score 0.7 is not one of 0, 0.5, 1"


def ordering_judge(request: RecordedRequest) -> ScriptedReply:
    """Matches a line to the event whose text it contains."""
    prompt = _prompt(request)
    events = re.findall(
        r"^(\d+)\. (.+)$",
        prompt.split("Reference events (numbered):\n")[1].split("\n\n")[0],
        re.MULTILINE,
    )
    lines = re.findall(
        r"^\d+\. (.+)$",
        prompt.split("Response lines (numbered):\n")[1].split("\n\n")[0],
        re.MULTILINE,
    )
    matches = [
        next((int(n) for n, e in events if e.lower() in line.lower()), None) for line in lines
    ]
    return ScriptedOpenAIServer.text_reply(json.dumps({"matches": matches}))


def test_beam_event_ordering_by_kendall_tau(openai_server: ScriptedOpenAIServer) -> None:
    rubric = ["Core functionality", "Transaction error handling", "Security and deployment"]
    judge = _judge(openai_server)
    openai_server.enqueue(ordering_judge, ordering_judge, ordering_judge)
    right = judge.beam_ordering(
        "order?",
        rubric,
        "1. Core functionality first\n2. Then transaction error handling\n"
        "3. Security and deployment",
    )
    backwards = judge.beam_ordering(
        "order?",
        rubric,
        "Security and deployment\nTransaction error handling\nCore functionality",
    )
    partial = judge.beam_ordering("order?", rubric, "Core functionality\nSomething else")
    assert right.score == 1.0 and right.detail["tau"] == 1.0
    assert backwards.score == 0.0
    assert partial.detail["positions"] == [0, None, None]
    assert 0.5 < (partial.score or 0) < 1.0


def test_beam_event_ordering_wrong_length_is_malformed(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.enqueue_text('{"matches": [1]}')
    verdict = _judge(openai_server).beam_ordering("q", ["a", "b"], "a\nb")
    assert verdict.score is None
    assert verdict.malformed == "'matches' has 1 entries for 2 response lines"


def test_scoring_real_beam_and_locomo_questions(
    openai_server: ScriptedOpenAIServer, shared_data: Path, tmp_path: Path
) -> None:
    """Scripted right and wrong answers to real questions score 1 and 0 end to end."""
    beam = beam_questions(
        shared_data / "beam" / "chats", "100K", categories=["information_extraction"], limit=1
    )[0]
    assert beam.rubric == ("LLM response should state: March 29",)

    def criterion_judge(request: RecordedRequest) -> ScriptedReply:
        prompt = _prompt(request)
        wanted = _field(prompt, "Criterion").split(": ", 1)[1]
        score = 1.0 if wanted in _field(prompt, "Response") else 0.0
        return ScriptedOpenAIServer.text_reply(json.dumps({"score": score, "reason": "-"}))

    openai_server.enqueue(criterion_judge, criterion_judge)
    judge = _judge(openai_server)
    assert score_answer(beam, "Your first sprint ends on March 29.", judge).scores == {"judge": 1.0}
    assert score_answer(beam, "It ends in April.", judge).scores == {"judge": 0.0}

    locomo = locomo_questions(
        shared_data / "locomo" / "locomo10.json", tmp_path, categories=["2"], limit=1
    )[0]
    scored = score_answer(locomo, locomo.answer, None)
    assert scored.scores == {"f1": 1.0}
    openai_server.enqueue_text("CORRECT")
    with_j = score_answer(locomo, locomo.answer, judge)
    assert with_j.scores == {"f1": 1.0, "j": 1.0}
    with pytest.raises(UsageError, match="--judge-model"):
        score_answer(beam, "x", None)
