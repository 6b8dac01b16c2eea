"""Prompt text: read from package data (``scrollctx/agent/prompts/*.md``) and assembled here.

Invariants: no prompt text lives in a string literal of the loop; every run of every mode gets
the same system prompt and context-management rules (``system.md``, ``rules.md`` with the
headline protocol of :data:`scrollctx.view.HEADLINE_PROMPT`), plus one short mode text and, in
memory mode, the recall rules (``recall.md``: the paper's Appendix C instructions, in our
words) and at most one benchmark rubric (its data layout and answer format). Tool descriptions
come from ``tools.md`` (one ``## name`` section per tool).

A user may replace any of these files with their own (:class:`PromptSet`, ``--prompts DIR``):
the same format, the same ``$name`` placeholders, checked when the set is loaded (a required
placeholder missing, an unknown one, or a bare ``$`` not written ``$$`` is a
:class:`~scrollctx.errors.UsageError` naming the file). Tool descriptions (``tools.md``) are
part of the tool schemas and are not replaced.

Prompts are rendered from the toolset the model actually has (:class:`Capabilities`), so a
system is told only about tools it can call: a line of a prompt file may start with tags, and
is kept only when every tag holds. Tags: ``[kernel]`` / ``[nokernel]`` (a code-cell tool),
``[ms]`` (``ms`` bound in cells: ``recall_history_python``), ``[json]`` (``ms_*`` JSON memory
tools), ``[memory]`` / ``[nomemory]`` (either of the two), ``[index]`` (the context policy shows
an eviction index), ``[tool:NAME]`` / ``[notool:NAME]``. A bracket that is not a tag (such as
``[eviction index]``) is text.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from scrollctx.errors import UsageError
from scrollctx.view import HEADLINE_PROMPT

__all__ = [
    "MODES",
    "PROMPT_FILES",
    "RUBRICS",
    "Capabilities",
    "PromptSet",
    "build_system_prompt",
    "describe_function",
    "read_prompt",
    "render_index_header",
    "render_tagged",
    "tool_description",
]

RUBRICS = ("beam", "locomo", "longmemeval")
MODES = ("run", "ask", "chat")
_TAG = re.compile(r"\[(kernel|nokernel|ms|json|memory|nomemory|index|(?:no)?tool:\w+)\] ?")
_JSON_MEMORY = ("ms_search", "ms_expand", "ms_sql_query")
_INDEX_SENTENCE = re.compile(r" ?[^.\n]*\beviction index\b[^.\n]*\.", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a run's model can do, as the prompts describe it (see the module docstring).

    ``tools`` are the model-visible tool names; ``kernel`` says one of them runs code cells;
    ``index`` says the context policy shows an eviction index.
    """

    tools: frozenset[str]
    kernel: bool
    index: bool = True

    @classmethod
    def of(cls, tools: Iterable[str], *, kernel: bool, index: bool = True) -> Capabilities:
        """Capabilities of a toolset with these tool names."""
        return cls(frozenset(tools), kernel, index)

    @property
    def ms(self) -> bool:
        """Whether cells reach ``ms`` through a recall tool."""
        return self.kernel and "recall_history_python" in self.tools

    @property
    def json_memory(self) -> tuple[str, ...]:
        """The ``ms_*`` JSON memory tools present, in a fixed order."""
        return tuple(name for name in _JSON_MEMORY if name in self.tools)

    def holds(self, tag: str) -> bool:
        """Whether a prompt-line tag holds for these capabilities."""
        kind, _, name = tag.partition(":")
        memory = self.ms or bool(self.json_memory)
        facts = {
            "kernel": self.kernel,
            "nokernel": not self.kernel,
            "ms": self.ms,
            "json": bool(self.json_memory) and not self.ms,
            "memory": memory,
            "nomemory": not memory,
            "index": self.index,
            "tool": name in self.tools,
            "notool": name not in self.tools,
        }
        return facts[kind]


SCROLL_CAPABILITIES = Capabilities.of(
    ("repl_exec", "recall_history_python", "submit_answer"), kernel=True
)
"""The full system's capabilities (the default of :func:`build_system_prompt`)."""


def render_tagged(text: str, capabilities: Capabilities) -> list[str]:
    """Return the lines of ``text`` whose tags all hold, tags removed."""
    kept = []
    for line in text.splitlines():
        rest, held = line, True
        while (match := _TAG.match(rest)) is not None:
            held = held and capabilities.holds(match.group(1))
            rest = rest[match.end() :]
        if held:
            kept.append(rest)
    return kept


def render_index_header(capabilities: Capabilities, prompts: PromptSet | None = None) -> str:
    """The eviction index message's header, naming only tools the model has."""
    text = prompts.text("index") if prompts is not None else read_prompt("index")
    return " ".join(render_tagged(text, capabilities))


PROMPT_FILES: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    name: (frozenset(required), frozenset(optional))
    for name, required, optional in (
        ("system", {"tool_list"}, {"functions", "prebound"}),
        ("rules", {"headline_protocol"}, {"memory_tools"}),
        ("mode_run", set(), {"workspace"}),
        ("mode_ask", set(), {"recall_hint", "task_scope"}),
        ("mode_chat", set(), {"ms_hint", "recall_chat"}),
        ("recall", set(), set()),
        ("rubric_beam", set(), set()),
        ("rubric_locomo", set(), set()),
        ("rubric_longmemeval", set(), set()),
        ("index", set(), set()),
        ("nudge", set(), set()),
    )
}
"""The prompt files a :class:`PromptSet` may replace: (required, optional) ``$`` placeholders."""


@dataclass(frozen=True, slots=True)
class PromptSet:
    """The agent's prompt files: the package's, each replaced by a user file of the same name.

    Example::

        prompts = PromptSet.load(Path("my-prompts"))     # my-prompts/system.md, rules.md ...
        agent = Agent(model="openai:m", prompts=prompts)
    """

    texts: Mapping[str, str]
    origins: Mapping[str, str]
    """Where each prompt came from: ``package`` or the file's path."""

    @classmethod
    def load(cls, folder: str | os.PathLike[str] | None = None) -> PromptSet:
        """The package prompts, each replaced by ``folder/<name>.md`` when that file exists.

        Raises:
            UsageError: ``folder`` is not a folder, holds a ``.md`` file that is not a prompt,
                or a file whose placeholders are wrong.
        """
        texts = {name: read_prompt(name) for name in PROMPT_FILES}
        origins = dict.fromkeys(PROMPT_FILES, "package")
        for name, path in _user_prompt_files(folder).items():
            text = path.read_text(encoding="utf-8").rstrip()
            _check_placeholders(name, text, path)
            texts[name], origins[name] = text, str(path)
        return cls(texts, origins)

    def text(self, name: str) -> str:
        """The text of prompt ``name`` (a package file outside :data:`PROMPT_FILES` too)."""
        return self.texts[name] if name in self.texts else read_prompt(name)

    @property
    def replaced(self) -> dict[str, str]:
        """The prompts a user file replaced: name -> path."""
        return {name: origin for name, origin in self.origins.items() if origin != "package"}


def _user_prompt_files(folder: str | os.PathLike[str] | None) -> dict[str, Path]:
    if folder is None:
        return {}
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"--prompts {root} is not a folder of <prompt>.md files")
    found = {path.stem: path for path in sorted(root.glob("*.md"))}
    unknown = sorted(set(found) - set(PROMPT_FILES))
    if unknown or not found:
        named = ", ".join(f + ".md" for f in unknown) or "no <prompt>.md file"
        raise UsageError(
            f"--prompts {root}: {named} is not a prompt that can be replaced; the prompts are: "
            + ", ".join(f"{name}.md" for name in PROMPT_FILES)
        )
    return found


def _check_placeholders(name: str, text: str, path: Path) -> None:
    template = Template(text)
    if not template.is_valid():
        raise UsageError(
            f"prompt file {path}: a '$' that is not a placeholder; write '$$' for a dollar sign"
        )
    required, optional = PROMPT_FILES[name]
    used = set(template.get_identifiers())
    missing, unknown = sorted(required - used), sorted(used - required - optional)
    if missing or unknown:
        allowed = ", ".join(f"${p}" for p in sorted(required | optional)) or "none"
        problems = [f"missing ${p}" for p in missing] + [f"unknown ${p}" for p in unknown]
        raise UsageError(f"prompt file {path}: {'; '.join(problems)} (its placeholders: {allowed})")


@cache
def read_prompt(name: str) -> str:
    """Return the text of ``prompts/<name>.md`` (trailing whitespace removed)."""
    path = resources.files("scrollctx.agent") / "prompts" / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8").rstrip()
    except FileNotFoundError as exc:
        raise UsageError(f"no prompt named {name!r} in scrollctx/agent/prompts") from exc


@cache
def _tool_sections() -> dict[str, str]:
    sections: dict[str, str] = {}
    name = None
    for line in read_prompt("tools").splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = ""
        elif name is not None:
            sections[name] += line + "\n"
    return {key: text.strip() for key, text in sections.items()}


def tool_description(name: str) -> str:
    """Return the model-facing description of a built-in tool."""
    try:
        return _tool_sections()[name]
    except KeyError as exc:
        raise UsageError(f"no description for tool {name!r} in prompts/tools.md") from exc


def describe_function(func: Callable[..., Any], name: str) -> str:
    """One line for the prompt: ``name(signature)``: first line of the docstring."""
    try:
        signature = _signature_text(inspect.signature(func))
    except (TypeError, ValueError):
        signature = "(...)"
    doc = (inspect.getdoc(func) or "").strip().splitlines()
    return f"- `{name}{signature}`" + (f": {doc[0]}" if doc else "")


def _signature_text(signature: inspect.Signature) -> str:
    # String annotations (``from __future__ import annotations``) are shown without quotes.
    def shown(annotation: Any) -> str:
        text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
        return text.replace("typing.", "")

    params = []
    for param in signature.parameters.values():
        text = param.name
        if param.annotation is not inspect.Parameter.empty:
            text += f": {shown(param.annotation)}"
        if param.default is not inspect.Parameter.empty:
            text += f" = {param.default!r}"
        params.append(text)
    returns = signature.return_annotation
    arrow = "" if returns is inspect.Signature.empty else f" -> {shown(returns)}"
    return f"({', '.join(params)}){arrow}"


def build_system_prompt(
    mode: str,
    *,
    tool_lines: Iterable[str],
    function_lines: Iterable[str] = (),
    rubric: str | None = None,
    workspace: str | None = None,
    task_id: str | None = None,
    capabilities: Capabilities = SCROLL_CAPABILITIES,
    prompts: PromptSet | None = None,
) -> str:
    """Assemble the system prompt of one mode (``run``, ``ask`` or ``chat``).

    Only the lines whose tags hold for ``capabilities`` are kept (see the module docstring).
    ``prompts`` supplies the files (default: the package's); the rules are numbered only in
    the package's own ``rules.md``, a user's is used as written.

    Raises:
        UsageError: an unknown mode or rubric.
    """
    if mode not in MODES:
        raise UsageError(f"unknown agent mode {mode!r}; use one of {', '.join(MODES)}")
    if rubric is not None and rubric not in RUBRICS:
        raise UsageError(f"unknown rubric {rubric!r}; use one of {', '.join(RUBRICS)}")
    caps, files = capabilities, prompts or PromptSet.load()
    functions = list(function_lines)
    function_text = (
        "\nEnvironment functions, callable by name inside every cell:\n" + "\n".join(functions)
        if functions and caps.kernel
        else ""
    )
    head = _render(files, "system", caps, tool_list="\n".join(tool_lines),
                   functions=function_text, prebound=_prebound(caps))  # fmt: skip
    rules = _render(files, "rules", caps, headline_protocol=_headline_protocol(caps),
                    memory_tools=_memory_tools(caps))  # fmt: skip
    if "rules" not in files.replaced:
        rules = _numbered(rules)
    mode_text = _render(
        files,
        f"mode_{mode}",
        caps,
        workspace=f": {workspace}" if workspace else "",
        task_scope=_task_scope(task_id, caps),
        recall_hint=_recall_hint(caps),
        ms_hint=" and `ms`" if caps.ms else "",
        recall_chat=" Use your memory tools for something said long ago."
        if caps.json_memory
        else "",
    )
    parts = [head, rules, mode_text]
    if mode == "ask" and caps.holds("memory"):
        parts.append(_render(files, "recall", caps))
    if rubric is not None:
        parts.append(_render(files, f"rubric_{rubric}", caps))
    return "\n\n".join(parts)


def _render(files: PromptSet, name: str, caps: Capabilities, **values: str) -> str:
    lines = render_tagged(files.text(name), caps)
    return Template("\n".join(lines)).substitute(values).strip()


def _numbered(rules: str) -> str:
    """Number the rule lines (every line between the title and the headline protocol)."""
    head, _, rest = rules.partition("\n\n")
    items, _, protocol = rest.partition("\n\n")
    numbered = [f"{n}. {line}" for n, line in enumerate(items.splitlines(), start=1)]
    return "\n".join([head, "", *numbered, "", protocol])


def _headline_protocol(caps: Capabilities) -> str:
    """The view's headline protocol; without an index, its sentence about the index goes."""
    if caps.index:
        return HEADLINE_PROMPT
    return _INDEX_SENTENCE.sub("", HEADLINE_PROMPT)


def _prebound(caps: Capabilities) -> str:
    names = ["`days_between(d1, d2)`", "`or_terms(text)`"]
    if caps.ms:
        return (
            "Pre-bound in every cell: `ms` (the memory surface over the Event Log; "
            "`print(ms.help())` lists its calls), " + " and ".join(names) + "."
        )
    return "Pre-bound in every cell: " + " and ".join(names) + "."


def _memory_tools(caps: Capabilities) -> str:
    return ", ".join(f"`{name}`" for name in caps.json_memory)


def _recall_hint(caps: Capabilities) -> str:
    if caps.ms:
        return "Recall with `recall_history_python`"
    return "Recall with " + " and ".join(f"`{name}`" for name in caps.json_memory)


def _task_scope(task_id: str | None, caps: Capabilities) -> str:
    if not task_id:
        return ""
    text = f" The imported conversation you are asked about is task_id={task_id!r}"
    if caps.ms:
        return text + "; ms.search(..., scope='task') limits a search to it."
    return text + "."
