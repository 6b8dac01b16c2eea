"""Prompt text: read from package data (``scrollctx/agent/prompts/*.md``) and assembled here.

Invariants: no prompt text lives in a string literal of the loop; every run of every mode gets
the same system prompt and context-management rules (``system.md``, ``rules.md`` with the
headline protocol of :data:`scrollctx.view.HEADLINE_PROMPT`), plus one short mode text and, in
memory mode, at most one benchmark rubric. Tool descriptions come from ``tools.md`` (one
``## name`` section per tool).

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
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from scrollctx.errors import UsageError
from scrollctx.view import HEADLINE_PROMPT

__all__ = [
    "MODES",
    "RUBRICS",
    "Capabilities",
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


def render_index_header(capabilities: Capabilities) -> str:
    """The eviction index message's header, naming only tools the model has."""
    return " ".join(render_tagged(read_prompt("index"), capabilities))


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
) -> str:
    """Assemble the system prompt of one mode (``run``, ``ask`` or ``chat``).

    Only the lines whose tags hold for ``capabilities`` are kept (see the module docstring).

    Raises:
        UsageError: an unknown mode or rubric.
    """
    if mode not in MODES:
        raise UsageError(f"unknown agent mode {mode!r}; use one of {', '.join(MODES)}")
    if rubric is not None and rubric not in RUBRICS:
        raise UsageError(f"unknown rubric {rubric!r}; use one of {', '.join(RUBRICS)}")
    caps = capabilities
    functions = list(function_lines)
    function_text = (
        "\nEnvironment functions, callable by name inside every cell:\n" + "\n".join(functions)
        if functions and caps.kernel
        else ""
    )
    head = _render("system", caps, tool_list="\n".join(tool_lines), functions=function_text,
                   prebound=_prebound(caps))  # fmt: skip
    rules = _numbered(_render("rules", caps, headline_protocol=_headline_protocol(caps),
                              memory_tools=_memory_tools(caps)))  # fmt: skip
    mode_text = _render(
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
    if rubric is not None:
        parts.append("\n".join(render_tagged(read_prompt(f"rubric_{rubric}"), caps)))
    return "\n\n".join(parts)


def _render(name: str, caps: Capabilities, **values: str) -> str:
    lines = render_tagged(read_prompt(name), caps)
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
