"""The judges' prompts, in our own words, faithful in substance to each benchmark's rubric.

LongMemEval (one yes/no prompt per question type; the official judge reads ``yes`` in the
reply), BEAM (one criterion of the rubric at a time, graded 1 / 0.5 / 0 with a JSON reply;
event ordering matches response lines to the reference events) and LoCoMo's community "J"
judge (a generous CORRECT/WRONG). Placeholders use :meth:`str.format` fields.

Deviation from BEAM's reference code, on purpose: its judge prompt has a ``<question>``
placeholder that is never filled in; ours fills it in.
"""

from __future__ import annotations

__all__ = [
    "BEAM_ORDERING",
    "BEAM_RUBRIC_ITEM",
    "LME_ABSTENTION",
    "LME_FACTUAL",
    "LME_KNOWLEDGE_UPDATE",
    "LME_PREFERENCE",
    "LME_TEMPORAL",
    "LOCOMO_J",
]

_LME_HEAD = (
    "You grade a chat assistant's answer to a question about the user's earlier "
    "conversations.\n\nQuestion: {question}\n\nReference answer: {answer}\n\n"
    "Assistant's response: {response}\n\n"
)
_LME_TAIL = "\n\nAnswer with one word: yes or no."

LME_FACTUAL = (
    _LME_HEAD + "Say yes if the response contains the reference answer, states something "
    "equivalent to it, or shows every step needed to reach it. Say no if the response is wrong, "
    "or if it gives only part of the information the reference answer requires." + _LME_TAIL
)
"""single-session-user, single-session-assistant and multi-session questions."""

LME_TEMPORAL = (
    _LME_HEAD + "Say yes if the response contains the reference answer, states something "
    "equivalent to it, or shows every step needed to reach it; say no if it is wrong or only "
    "partly right. Counting days, weeks or months is allowed to be off by one: for example a "
    "response of 18 days where the reference says 19 is still correct." + _LME_TAIL
)
"""temporal-reasoning questions: off-by-one tolerance on counts of days, weeks or months."""

LME_KNOWLEDGE_UPDATE = (
    _LME_HEAD + "The reference answer is the user's latest, updated information. Say yes if "
    "the response gives this updated answer; a response that also mentions older information "
    "is still correct, as long as it gives the updated answer as the current one. Say no if "
    "the response gives only outdated information or is otherwise wrong." + _LME_TAIL
)
"""knowledge-update questions: older information next to the update is accepted."""

LME_PREFERENCE = (
    "You grade a chat assistant's reply to a user whose preferences appeared in earlier "
    "conversations.\n\nUser's request: {question}\n\nRubric for the reply the user would "
    "want: {answer}\n\nAssistant's response: {response}\n\nSay yes if the response recalls "
    "and uses the user's personal information correctly, in the spirit of the rubric; it need "
    "not cover every point of the rubric. Say no if it ignores or misuses that information."
    + _LME_TAIL
)
"""single-session-preference questions: the gold answer is a rubric."""

LME_ABSTENTION = (
    "You grade a chat assistant's answer to a question that cannot be answered from the "
    "user's earlier conversations (it asks about something that was never said).\n\n"
    "Question: {question}\n\nWhy it cannot be answered: {answer}\n\nAssistant's response: "
    "{response}\n\nSay yes if the response recognizes that the question cannot be answered "
    "from the conversations (for example, says the information was never mentioned or is not "
    "available). Say no if it answers as though the information existed." + _LME_TAIL
)
"""Any question whose id ends in ``_abs``."""

BEAM_RUBRIC_ITEM = (
    "You grade one criterion of a rubric against an assistant's response.\n\n"
    "Question: {question}\n\nCriterion: {criterion}\n\nResponse: {response}\n\n"
    "Grade meaning, not wording: a paraphrase meets the criterion, a number written "
    "differently but with the same value counts, and style or format does not matter unless "
    "the criterion asks for it. Score 1.0 if the response fully meets the criterion, 0.5 if it "
    "meets it only partly, 0.0 if it does not meet it or does not address the question.\n\n"
    'Reply with JSON only, exactly: {{"score": 1.0 or 0.5 or 0.0, "reason": "one sentence"}}'
)

BEAM_ORDERING = (
    "An assistant was asked to list events in the order they happened. Decide, for each line "
    "of its response, which reference event (if any) the line states.\n\nQuestion: "
    "{question}\n\nReference events (numbered):\n{events}\n\nResponse lines (numbered):\n"
    "{lines}\n\nA line states an event when it describes the same thing, even in other "
    "words. Use each event number at most once, for the first line that states it.\n\n"
    'Reply with JSON only: {{"matches": [...]}} with one entry per response line, in order: '
    "the event's number, or null when the line states none of the events."
)

LOCOMO_J = (
    "You grade an answer to a question about a conversation between two people.\n\n"
    "Question: {question}\n\nGold answer: {answer}\n\nGenerated answer: {response}\n\n"
    "Be generous: the generated answer is CORRECT if it refers to the same fact, person, "
    "thing or time as the gold answer, even if it is longer or worded differently (for dates, "
    "a different format or a relative phrase that resolves to the same date is fine). It is "
    "WRONG otherwise.\n\nReply with one word: CORRECT or WRONG."
)
