"""The judges over real HTTP: a scripted OpenAI-compatible server (test double) plays the judge.

The scripted judge answers from the request it receives (``enqueue(callable)``), so these tests
check the real plumbing: the prompt the judge is shown, the reply it sends, how it is read.
Expected readings follow the official evaluators (LongMemEval ``evaluate_qa.py``, BEAM
``compute_metrics.py``, Mem0's ``llm_judge.py``); each test says which rule it pins.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from scripted_servers import RecordedRequest, ScriptedOpenAIServer, ScriptedReply

from scrollctx.agent import resolve_model
from scrollctx.bench._judge import Judge, parse_beam_json, parse_json_reply, said_yes
from scrollctx.bench._judge_prompts import JudgePrompts
from scrollctx.bench._questions import beam_questions, locomo_questions
from scrollctx.bench._scoring import score_answer
from scrollctx.errors import UsageError


def _judge(server: ScriptedOpenAIServer, **options: object) -> Judge:
    return Judge(resolve_model("openai:judge-model", environ=server.environ), **options)  # type: ignore[arg-type]


def _prompt(request: RecordedRequest) -> str:
    return str(request.body["messages"][-1]["content"])


def _field(prompt: str, name: str) -> str:
    match = re.search(rf"{name}: (.*?)\n\n", prompt + "\n\n", re.DOTALL)
    assert match is not None, prompt
    return match.group(1)


def substring_judge(request: RecordedRequest) -> ScriptedReply:
    """Says yes when the response contains the correct answer (lower-cased)."""
    prompt = _prompt(request)
    answer = _field(prompt, "Correct answer").lower()
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


def test_longmemeval_reads_yes_anywhere_as_the_official_code_does(
    openai_server: ScriptedOpenAIServer,
) -> None:
    """``evaluate_qa.py``: ``label = 'yes' in eval_response.lower()``. So a reply that starts
    with "No" but says "yes" later is correct, and a reply with neither word is wrong (it is
    flagged unreadable, not dropped from the mean)."""
    judge = _judge(openai_server)
    openai_server.enqueue_text("No. (The response does say yes to the trip, though.)")
    openai_server.enqueue_text("<think>yes or no?</think> I am unsure.")
    openai_server.enqueue_text("no")
    flipped = judge.longmemeval("q", "a", "r", "multi-session", "q1")
    unsure = judge.longmemeval("q", "a", "r", "multi-session", "q1")
    plain_no = judge.longmemeval("q", "a", "r", "multi-session", "q1")
    assert flipped.score == 1.0 and flipped.unreadable is None
    assert unsure.score == 0.0 and unsure.malformed is None
    assert unsure.unreadable is not None and "neither yes nor no" in unsure.unreadable
    assert unsure.replies == ("<think>yes or no?</think> I am unsure.",)
    assert plain_no.score == 0.0 and plain_no.unreadable is None


def test_longmemeval_prompt_follows_the_question_type(openai_server: ScriptedOpenAIServer) -> None:
    """One prompt per type; any id containing ``_abs`` (the official test) is abstention."""
    judge = _judge(openai_server)
    for _ in range(5):
        openai_server.enqueue_text("Yes.")
    judge.longmemeval("q", "a", "r", "temporal-reasoning", "t1")
    judge.longmemeval("q", "a", "r", "knowledge-update", "k1")
    judge.longmemeval("q", "a", "r", "single-session-preference", "p1")
    judge.longmemeval("q", "a", "r", "knowledge-update", "k2_abs")
    judge.longmemeval("q", "a", "r", "multi-session", "m3_abs_2")
    prompts = [_prompt(r) for r in openai_server.requests]
    assert "off-by-one" in prompts[0] and "any other unit" in prompts[0]
    assert "updated answer is the correct answer" in prompts[1]
    assert "as the current one" not in prompts[1]
    assert "Rubric: a" in prompts[2]
    assert "information is incomplete" in prompts[3]
    assert "cannot be answered" in prompts[4]


def test_reply_parsers() -> None:
    assert said_yes("<think>no no</think>\nYes, it matches.") is True
    assert said_yes("<think>yes</think> NO") is False
    assert said_yes("eyes") is True  # the official test is a substring test
    assert parse_json_reply('```json\n{"score": 0.5, "reason": "x"}\n```') == {
        "score": 0.5,
        "reason": "x",
    }
    assert parse_json_reply('{not json} then {"a": 1}') == {"a": 1}
    assert parse_json_reply("nothing here") is None


def test_beam_json_is_read_and_repaired_as_beams_evaluator_does() -> None:
    """``parse_json_response``: the whole reply, a fenced block, the first ``{...}``; when
    those fail the caller repairs the whole reply with ``json_repair``."""
    assert parse_beam_json('{"score": 1.0, "reason": "ok"}') == {"score": 1.0, "reason": "ok"}
    assert parse_beam_json('```json\n{"score": 0.5}\n```') == {"score": 0.5}
    assert parse_beam_json('Verdict: {"score": 0} (strict)') == {"score": 0}
    # truncated by the token limit: the string and the object are closed by the repair
    truncated = parse_beam_json('{"score": 1.0, "reason": "the response states the')
    assert truncated == {"score": 1.0, "reason": "the response states the"}
    # badly quoted: single quotes and bare keys
    assert parse_beam_json("{score: 0.5, reason: 'partly'}") == {"score": 0.5, "reason": "partly"}
    # a brace inside the reason defeats the shortest-match step; the repair still reads it
    inner = parse_beam_json('The score is {"score": 1.0, "reason": "has {x} inside"} done')
    assert inner == {"score": 1.0, "reason": "has {x} inside"}
    assert parse_beam_json("no json here") in (None, "", {}, [])


def rubric_judge(scores: dict[str, object]) -> object:
    """Replies with the scripted score (or raw text) for the criterion named in the prompt."""

    def respond(request: RecordedRequest) -> ScriptedReply:
        criterion = _field(_prompt(request), "Criterion to check")
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
    assert "Question the user asked: q" in _prompt(openai_server.requests[0])
    openai_server.enqueue(rubric_judge(scores), rubric_judge(scores))
    exact = _judge(openai_server, beam_integer_cast=False).beam_rubric(
        "q", ["states A", "states B"], "A and sort of B"
    )
    assert exact.score == 0.75


def test_beam_rubric_prompt_states_the_official_rules(openai_server: ScriptedOpenAIServer) -> None:
    """The criteria of BEAM's unified judge prompt, in our words: negative criteria (with the
    responsiveness condition), compound criteria, hedging, equivalent amounts and dates."""
    openai_server.enqueue_text('{"score": 1.0, "reason": "-"}')
    _judge(openai_server).beam_rubric("q", ["does not mention Jira"], "r")
    prompt = _prompt(openai_server.requests[0])
    for phrase in (
        "negative criterion",
        "forbidden element is absent",
        "some of them partial compliance",
        "Do not penalize hedging",
        "sixty-eight thousand dollars",
        "dates are equal when their values are equal",
    ):
        assert phrase in prompt


def test_beam_rubric_truncated_and_off_scale_replies(openai_server: ScriptedOpenAIServer) -> None:
    """A truncated reply is repaired; an off-scale score is cast as BEAM casts it (int(0.7) =
    0, int(1.5) = 1) and flagged; a score ``int()`` cannot read ("0.5" as text) is malformed,
    where BEAM's evaluator would stop."""
    scores: dict[str, object] = {
        "states A": '{"score": 1.0, "reason": "the response says A and',
        "states B": 0.7,
        "states C": 1.5,
    }
    openai_server.enqueue(*(rubric_judge(scores) for _ in range(3)))
    verdict = _judge(openai_server).beam_rubric("q", ["states A", "states B", "states C"], "r")
    assert verdict.score == pytest.approx((1 + 0 + 1) / 3)
    assert verdict.detail["off_scale"] == [2, 3]
    assert verdict.detail["uncast"] == pytest.approx((1.0 + 0.7 + 1.5) / 3)
    openai_server.enqueue(rubric_judge({"states A": '{"score": "0.5"}'}))
    bad = _judge(openai_server).beam_rubric("q", ["states A"], "r")
    assert bad.score is None
    assert bad.malformed is not None and "item 1" in bad.malformed


def equivalence_judge(request: RecordedRequest) -> ScriptedReply:
    """BEAM's pairwise check: YES when the answer line contains the event's text."""
    prompt = _prompt(request)
    event = _field(prompt, "First snippet").lower()
    line = _field(prompt, "Second snippet").lower()
    return ScriptedOpenAIServer.text_reply("YES" if event in line else "NO")


EVENTS = ["Core functionality", "Transaction error handling", "Security and deployment"]
MARKDOWN = (
    "Here is the order:\n\n1. Core functionality first\n2. Then transaction error handling\n"
    "3. Security and deployment\n\nHope this helps!"
)


def test_beam_event_ordering_pairwise_ranks_every_line(openai_server: ScriptedOpenAIServer) -> None:
    """BEAM's way: for each line, each unused event in order is asked about until one says
    yes; blank lines are not asked (BEAM's judge says NO to them). The markdown answer in
    perfect order then scores (1 + 6 / sqrt(180)) / 2 (derived in test_qa_scorers.py)."""
    openai_server.enqueue(*(equivalence_judge for _ in range(6)))
    verdict = _judge(openai_server).beam_ordering("order?", EVENTS, MARKDOWN)
    assert verdict.score == pytest.approx((1 + 6 / math.sqrt(180)) / 2)
    assert verdict.detail["matches"] == [None, None, 0, 1, 2, None, None]
    # calls: header 3, E1 1, E2 1 (E1 used), E3 1 = 6; the blanks none, the closing line
    # none (every event is used by then)
    assert len(openai_server.requests) == 6
    asked = [(_field(_prompt(r), "First snippet"), _field(_prompt(r), "Second snippet"))
             for r in openai_server.requests]  # fmt: skip
    assert asked[3] == ("Core functionality", "1. Core functionality first")
    assert asked[4] == ("Transaction error handling", "2. Then transaction error handling")


def test_beam_event_ordering_options(openai_server: ScriptedOpenAIServer) -> None:
    """``matched-lines`` is the former ranking (unmatched lines ignored: this answer 1.0, an
    empty one 0); ``batch`` matches every non-blank line in one call."""
    openai_server.enqueue(*(equivalence_judge for _ in range(6)))
    matched = _judge(openai_server, ordering_rank="matched-lines").beam_ordering(
        "order?", EVENTS, MARKDOWN
    )
    assert matched.score == 1.0
    empty = _judge(openai_server, ordering_rank="matched-lines").beam_ordering("q", EVENTS, "")
    assert empty.score == 0.0
    official_empty = _judge(openai_server).beam_ordering("q", EVENTS, "")
    assert official_empty.score == pytest.approx((1 - 1 / math.sqrt(2)) / 2)
    assert len(openai_server.requests) == 6
    openai_server.enqueue_text('{"matches": [null, 1, 2, 3, null]}')
    batch = _judge(openai_server, ordering_match="batch").beam_ordering("q", EVENTS, MARKDOWN)
    assert len(openai_server.requests) == 7
    assert "5. Hope this helps!" in _prompt(openai_server.requests[-1])
    assert batch.detail["matches"] == [None, None, 0, 1, 2, None, None]
    assert batch.score == pytest.approx((1 + 6 / math.sqrt(180)) / 2)
    with pytest.raises(UsageError):
        _judge(openai_server, ordering_match="magic")


def test_beam_event_ordering_batch_wrong_length_is_malformed(
    openai_server: ScriptedOpenAIServer,
) -> None:
    openai_server.enqueue_text('{"matches": [1]}')
    verdict = _judge(openai_server, ordering_match="batch").beam_ordering("q", ["a", "b"], "a\nb")
    assert verdict.score is None
    assert verdict.malformed == "'matches' has 1 entries for 2 response lines"


def test_locomo_j_reads_the_label_as_mem0s_harness(openai_server: ScriptedOpenAIServer) -> None:
    """Mem0's ``llm_judge.py``: ``json.loads(...)["label"]``, 1 only for exactly "CORRECT".
    Without JSON, one of the two words decides; both, or neither, is malformed."""
    judge = _judge(openai_server)
    for reply in (
        'Same date. {"label": "CORRECT"}',
        '{"label": "correct"}',
        "It refers to the same trip: CORRECT",
        "INCORRECT",
        "CORRECT or WRONG, hard to say",
    ):
        openai_server.enqueue_text(reply)
    scores = [judge.locomo("q", "a", "r") for _ in range(5)]
    assert [v.score for v in scores] == [1.0, 0.0, 1.0, 0.0, None]
    assert scores[4].malformed == "the reply says both CORRECT and WRONG"
    assert "touches on the same topic" in _prompt(openai_server.requests[0])


def test_judge_options_reach_the_request(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.enqueue_text("yes")
    judge = _judge(openai_server, max_tokens=10, options={"temperature": 0.2, "seed": 7})
    judge.longmemeval("q", "a", "r", "multi-session", "q1")
    body = openai_server.requests[0].body
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.2, 10, 7)
    assert judge.settings()["options"] == {"temperature": 0.2, "seed": 7}


def test_user_judge_prompts_replace_ours_and_are_checked(
    openai_server: ScriptedOpenAIServer, tmp_path: Path
) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "longmemeval_factual.md").write_text(
        'Q={{question}} A={{answer}} R={{ response }} -- {"json": $5} Answer yes or no.'
    )
    prompts = JudgePrompts.load(folder)
    assert prompts.origins["longmemeval_factual"] == str(folder / "longmemeval_factual.md")
    openai_server.enqueue_text("yes")
    judge = _judge(openai_server, prompts=prompts)
    judge.longmemeval("q?", "an {{question}}", "r.", "multi-session", "x")
    sent = _prompt(openai_server.requests[0])
    assert sent == 'Q=q? A=an {{question}} R=r. -- {"json": $5} Answer yes or no.'
    assert judge.settings()["prompts"] == {
        "longmemeval_factual": str(folder / "longmemeval_factual.md")
    }
    # BEAM's own prompt leaves the question out: optional there
    (folder / "beam_rubric.md").write_text("<rubric_item>{{criterion}}</> {{response}}")
    JudgePrompts.load(folder)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("longmemeval_factual.md", "{{question}} {{answer}}", "missing {{response}}"),
        ("locomo_j.md", "{{question}} {{answer}} {{response}} {{gold}}", "unknown {{gold}}"),
        ("beam_rubric.md", "{{response}}", "missing {{criterion}}"),
        ("beam_scores.md", "{{response}}", "beam_scores.md is not a judge prompt"),
    ],
)
def test_bad_judge_prompts_are_refused_at_load(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        JudgePrompts.load(tmp_path)


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
        wanted = _field(prompt, "Criterion to check").split(": ", 1)[1]
        score = 1.0 if wanted in _field(prompt, "Response to judge") else 0.0
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
    openai_server.enqueue_text('{"label": "CORRECT"}')
    with_j = score_answer(locomo, locomo.answer, judge)
    assert with_j.scores == {"f1": 1.0, "j": 1.0}
    openai_server.enqueue_text("I cannot decide.")
    unreadable_j = score_answer(locomo, locomo.answer, judge)
    assert unreadable_j.scores == {"f1": 1.0}  # the F1 stays
    assert set(unreadable_j.malformed) == {"j"}
    with pytest.raises(UsageError, match="--judge-model"):
        score_answer(beam, "x", None)


def test_a_category_5_letter_answer_is_scored_by_its_option(
    shared_data: Path, tmp_path: Path
) -> None:
    """The letter of the "Not mentioned in the conversation" option scores 1, the other 0."""
    from scrollctx.bench._questions import locomo_options

    question = locomo_questions(
        shared_data / "locomo" / "locomo10.json", tmp_path, categories=["5"], limit=1
    )[0]
    option_a, _ = locomo_options(question)
    right, wrong = ("(a)", "(b)") if option_a.startswith("Not mentioned") else ("(b)", "(a)")
    assert score_answer(question, right, None).scores == {"f1": 1.0}
    assert score_answer(question, wrong, None).scores == {"f1": 0.0}
    assert score_answer(question, right[1], None).scores == {"f1": 1.0}
