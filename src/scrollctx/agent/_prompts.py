"""Prompt text: read from package data (``scrollctx/agent/prompts/*.md``) and assembled here.

Invariants: no prompt text lives in a string literal of the loop; every run of every mode gets
the same system prompt and context-management rules (``system.md``, ``rules.md`` with the
headline protocol of :data:`scrollctx.view.HEADLINE_PROMPT`), plus one short mode text and, in
memory mode, at most one benchmark rubric. Tool descriptions come from ``tools.md`` (one
``## name`` section per tool).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from scrollctx.errors import UsageError
from scrollctx.view import HEADLINE_PROMPT

__all__ = [
    "MODES",
    "RUBRICS",
    "build_system_prompt",
    "describe_function",
    "read_prompt",
    "tool_description",
]

RUBRICS = ("beam", "locomo", "longmemeval")
MODES = ("run", "ask", "chat")


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
) -> str:
    """Assemble the system prompt of one mode (``run``, ``ask`` or ``chat``).

    Raises:
        UsageError: an unknown mode or rubric.
    """
    if mode not in MODES:
        raise UsageError(f"unknown agent mode {mode!r}; use one of {', '.join(MODES)}")
    if rubric is not None and rubric not in RUBRICS:
        raise UsageError(f"unknown rubric {rubric!r}; use one of {', '.join(RUBRICS)}")
    functions = list(function_lines)
    function_text = (
        "\nEnvironment functions, callable by name inside every cell:\n" + "\n".join(functions)
        if functions
        else ""
    )
    head = Template(read_prompt("system")).substitute(
        tool_list="\n".join(tool_lines), functions=function_text
    )
    rules = Template(read_prompt("rules")).substitute(headline_protocol=HEADLINE_PROMPT)
    scope = (
        f" The imported conversation you are asked about is task_id={task_id!r}; "
        "ms.search(..., scope='task') limits a search to it."
        if task_id
        else ""
    )
    mode_text = Template(read_prompt(f"mode_{mode}")).substitute(
        workspace=f": {workspace}" if workspace else "", task_scope=scope
    )
    parts = [head, rules, mode_text]
    if rubric is not None:
        parts.append(read_prompt(f"rubric_{rubric}"))
    return "\n\n".join(parts)
