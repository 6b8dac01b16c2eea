"""Answering one tool call of the model with one of our own tools.

Shared by every loop that answers the model's calls itself: the agent loop (all its tools) and
the proxy's recall loop (``recall_history_python``, beside tools its client answers).

Invariant: a call always gets exactly one :class:`Observation`, the text the model receives
next: an unknown tool, arguments that are not a JSON object, arguments the tool refuses (a cell
larger than the kernel takes) and a failing kernel each become an error observation, never an
exception, so a tool call is never left without its result.
The one signal that passes is the submitted answer, returned beside the observation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scrollctx.agent._tools import AgentTool, AnswerSubmitted, Observation, ToolContext, Toolset
from scrollctx.agent.backends import ToolCall
from scrollctx.errors import KernelError, UsageError

__all__ = ["answer_call", "invoke_tool"]


def answer_call(
    call: ToolCall, toolset: Toolset, context: ToolContext
) -> tuple[Observation, str | None]:
    """Run the tool ``call`` names; return its observation and the answer it submitted, if any."""
    tool = toolset.get(call.name)
    if tool is None:
        names = ", ".join(t.name for t in toolset.tools)
        return Observation(f"error: no tool named {call.name!r}; tools: {names}", False), None
    if not call.has_valid_arguments:
        return Observation(
            f"error: the arguments of {call.name} are unusable ({call.arguments_error}); "
            "send one JSON object",
            ok=False,
        ), None
    return invoke_tool(tool, call.arguments, context)


def invoke_tool(
    tool: AgentTool, args: Mapping[str, Any], context: ToolContext
) -> tuple[Observation, str | None]:
    """Run ``tool`` with ``args``; a failing kernel is an observation, an answer is returned."""
    try:
        return tool.run(args, context), None
    except AnswerSubmitted as signal:
        return Observation("answer submitted"), signal.answer
    except KernelError as exc:
        # The call must still get its result (views pair calls with results); a kernel that
        # stays broken ends an agent run at its step limit, with a failure record.
        return Observation(f"error: the kernel failed: {exc}", ok=False), None
    except UsageError as exc:  # the call as the model made it cannot run (a cell too large)
        return Observation(f"error: {exc}", ok=False), None
