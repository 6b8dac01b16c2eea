"""The judges' prompts: package files in our own words, or files a user supplies.

Each prompt is one file, ``<name>.md``, whose placeholders are written ``{{name}}``; every
other character is literal (braces of a JSON example, ``$`` amounts), so an official prompt
text can be dropped in as it is once its placeholders are renamed. ``--judge-prompts DIR``
replaces the package file of each name found in DIR; the names and placeholders are:

============================= =================================== ==========================
prompt                        used for                            placeholders
============================= =================================== ==========================
longmemeval_factual           single-session-user/-assistant,     question, answer, response
                              multi-session
longmemeval_temporal          temporal-reasoning                  question, answer, response
longmemeval_knowledge_update  knowledge-update                    question, answer, response
longmemeval_preference        single-session-preference (answer   question, answer, response
                              is the rubric)
longmemeval_abstention        every ``_abs`` question (answer is  question, answer, response
                              the explanation)
beam_rubric                   one rubric criterion                criterion, response;
                                                                  question optional
beam_equivalence              one event against one answer line   reference, line
                              (event ordering, pairwise matching)
beam_ordering_batch           every answer line in one call       events, lines;
                              (event ordering, batch matching)    question optional
locomo_j                      LoCoMo J                            question, answer, response
============================= =================================== ==========================

Invariants: a prompt set is checked when it is loaded (before any question runs): a file
missing a required placeholder, or naming one that does not exist, is a
:class:`~scrollctx.errors.UsageError` that names the file and the placeholders; so is a file in
DIR whose name is not a prompt. Rendering replaces each placeholder in one pass, so text that
a value brings in (an answer containing ``{{question}}``) is never substituted again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from scrollctx.errors import UsageError

__all__ = ["JUDGE_PROMPTS", "JudgePrompts"]

_LME: tuple[set[str], set[str]] = ({"question", "answer", "response"}, set())
JUDGE_PROMPTS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    name: (frozenset(required), frozenset(optional))
    for name, (required, optional) in {
        "longmemeval_factual": _LME,
        "longmemeval_temporal": _LME,
        "longmemeval_knowledge_update": _LME,
        "longmemeval_preference": _LME,
        "longmemeval_abstention": _LME,
        "beam_rubric": ({"criterion", "response"}, {"question"}),
        "beam_equivalence": ({"reference", "line"}, set()),
        "beam_ordering_batch": ({"events", "lines"}, {"question"}),
        "locomo_j": _LME,
    }.items()
}
"""Every judge prompt: (required placeholders, optional placeholders)."""

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")


def _shown(names: list[str]) -> str:
    return ", ".join("{{" + name + "}}" for name in names)


def _check(name: str, text: str, where: str) -> None:
    required, optional = JUDGE_PROMPTS[name]
    used = set(_PLACEHOLDER.findall(text))
    missing, unknown = sorted(required - used), sorted(used - required - optional)
    problems = []
    if missing:
        problems.append("missing " + _shown(missing))
    if unknown:
        problems.append("unknown " + _shown(unknown))
    if problems:
        allowed = _shown(sorted(required | optional))
        raise UsageError(
            f"judge prompt {where}: {'; '.join(problems)} (its placeholders are {allowed})"
        )


def _package_text(name: str) -> str:
    path = resources.files("scrollctx.bench") / "judge_prompts" / f"{name}.md"
    return path.read_text(encoding="utf-8").strip()


@dataclass(frozen=True, slots=True)
class JudgePrompts:
    """One checked set of judge prompts (see the module docstring).

    Example::

        prompts = JudgePrompts.load(Path("official-prompts"))   # or JudgePrompts.load()
        text = prompts.render("locomo_j", question="q", answer="a", response="r")
    """

    texts: Mapping[str, str]
    origins: Mapping[str, str]
    """Where each prompt came from: ``package`` or the file's path."""

    @classmethod
    def load(cls, folder: Path | None = None) -> JudgePrompts:
        """The package prompts, each replaced by ``folder/<name>.md`` when that file exists.

        Raises:
            UsageError: ``folder`` is not a folder, holds a ``.md`` file that is not a prompt,
                or a prompt whose placeholders are wrong.
        """
        texts = {name: _package_text(name) for name in JUDGE_PROMPTS}
        origins = dict.fromkeys(JUDGE_PROMPTS, "package")
        if folder is not None:
            for name, path in _user_files(Path(folder)).items():
                texts[name] = path.read_text(encoding="utf-8").strip()
                origins[name] = str(path)
        for name, text in texts.items():
            _check(name, text, origins[name] if origins[name] != "package" else name)
        return cls(texts, origins)

    def render(self, name: str, **values: object) -> str:
        """Fill ``name``'s placeholders with ``values`` (a missing optional one becomes "")."""
        text = self.texts[name]
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), "")), text)


def _user_files(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise UsageError(f"--judge-prompts {folder} is not a folder of <prompt>.md files")
    found = {path.stem: path for path in sorted(folder.glob("*.md"))}
    unknown = sorted(set(found) - set(JUDGE_PROMPTS))
    if unknown:
        raise UsageError(
            f"--judge-prompts {folder}: {', '.join(f + '.md' for f in unknown)} "
            f"{'is not a judge prompt' if len(unknown) == 1 else 'are not judge prompts'}; "
            f"the prompts are: {', '.join(JUDGE_PROMPTS)}"
        )
    if not found:
        raise UsageError(
            f"--judge-prompts {folder} holds no <prompt>.md file; the prompts are: "
            + ", ".join(JUDGE_PROMPTS)
        )
    return found
