"""The model-call options every command that talks to a model shares, defined once.

``@model_options`` adds ``--model``, ``--base-url``, ``--api-key``, ``--max-tokens``,
``--timeout`` and ``--model-option KEY=VALUE`` to a command and hands it one
:class:`ModelCall` (parameter ``model_call``) instead of loose values. ``scroll ask``, ``run``,
``chat`` and ``bench run`` use it. ``--model-option`` sets any backend option (repeatable;
VALUE is read as JSON when it parses, else as text: ``temperature=0``,
``extra_body={"enable_thinking": true}``, ``reasoning_effort=high``); an unknown key is refused
by the backend's options before any call.

To add a knob: one field on :class:`ModelCall` and one option in ``_OPTIONS`` whose parameter
name is the field's name; the decorator moves every field's value into the bundle.

Precedence of each value (highest first): the flag, its environment variable where it has one
(``SCROLL_MODEL``), ``[backends.NAME]`` / ``[backends.NAME.options]`` in ``<store>/config.toml``,
the default. ``--max-tokens`` defaults to a cap the agent derives from its budget; ``--timeout``
to the backend's (120 s).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

import click

from scrollctx.cli._app import Bounded
from scrollctx.cli._bundles import option_bundle
from scrollctx.errors import UsageError

__all__ = ["ModelCall", "model_options", "parse_options"]


_ENDPOINT_VARIABLES = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    "anthropic": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
}


@dataclass(frozen=True, slots=True)
class ModelCall:
    """What the model flags of one command said (``None``: not given)."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int | None = None
    timeout: float | None = None
    model_options: tuple[str, ...] = ()
    """``KEY=VALUE`` pairs from ``--model-option``."""

    def environ(self) -> dict[str, str]:
        """The process environment with the flags' endpoint in the provider's variables.

        The key travels in the environment mapping handed to the backend, never in options,
        so it cannot reach the log, a trace or a result record.
        """
        environ = dict(os.environ)
        if self.base_url is None and self.api_key is None:
            return environ
        spec = self.model or environ.get("SCROLL_MODEL") or "openai"
        provider = spec.partition(":")[0]
        if provider not in _ENDPOINT_VARIABLES:
            raise UsageError(
                f"--base-url and --api-key apply to openai: and anthropic: models, not {spec!r}; "
                "drop them or pass --model openai:NAME"
            )
        url_variable, key_variable = _ENDPOINT_VARIABLES[provider]
        if self.base_url is not None:
            environ[url_variable] = self.base_url
        if self.api_key is not None:
            environ[key_variable] = self.api_key
        return environ

    def backend_options(self) -> dict[str, Any]:
        """The per-call backend options the flags set (only those given)."""
        options = parse_options(self.model_options, "--model-option")
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.timeout is not None:
            options["timeout"] = self.timeout
        return options


def parse_options(pairs: tuple[str, ...], flag: str) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as options: VALUE as JSON when it parses, else as text.

    Raises:
        UsageError: a pair without ``=`` or with an empty key.
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{flag} {pair!r}: write KEY=VALUE, e.g. {flag} temperature=0")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


_OPTIONS = (
    click.option("--model", "model", metavar="SPEC", envvar="SCROLL_MODEL",
                 help="openai:NAME, anthropic:NAME or local (env SCROLL_MODEL)."),
    click.option("--base-url", "base_url", metavar="URL",
                 help="Endpoint of an openai: or anthropic: model (else the env/config)."),
    click.option("--api-key", "api_key", metavar="KEY",
                 help="Key for that endpoint (prefer OPENAI_API_KEY in the environment)."),
    click.option("--max-tokens", "max_tokens", type=click.IntRange(min=1), metavar="N",
                 help="Cap each model reply at N tokens (default: from the budget; "
                 "config: [backends.NAME.options] max_tokens)."),
    click.option("--timeout", "timeout", type=Bounded(min=0, min_open=True),
                 metavar="SECONDS", help="Give up on one model request after this long "
                 "(default 120; config: [backends.NAME.options] timeout)."),
    click.option("--model-option", "model_options", multiple=True, metavar="KEY=VALUE",
                 help="Any backend option, repeatable; VALUE as JSON if it parses "
                 "(e.g. temperature=0, extra_body='{\"enable_thinking\": true}')."),
)  # fmt: skip


model_options = option_bundle(ModelCall, _OPTIONS, "model_call")
"""Add the model options to a command; it receives them as ``model_call: ModelCall``."""
