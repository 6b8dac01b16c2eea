"""Which MCP servers an agent uses: ``--mcp 'NAME=COMMAND ARGS'`` and ``[mcp.servers.NAME]``.

A spec names a server and how to reach it: a command to start (stdio) or a URL (streamable
HTTP). ``NAME`` becomes a namespace in the kernel (``NAME.tool(...)``), so it must be a Python
identifier the kernel does not bind itself. Nothing here imports the ``mcp`` SDK: a bad flag or
config table is a clear error even where the extra is not installed.

Config (``<store>/config.toml``)::

    [mcp.servers.git]
    command = "mcp-server-git"             # or a list: ["uvx", "mcp-server-git"]
    args = ["--repository", "/src/app"]
    env = {GIT_PAGER = "cat"}
    timeout = 30                           # seconds one call may take
    expose = "both"                        # also offer its tools as JSON tools ("kernel": not)

    [mcp.servers.docs]
    url = "https://example.com/mcp"
    bearer_token_env_var = "DOCS_TOKEN"    # sent as Authorization: Bearer <value>
"""

from __future__ import annotations

import keyword
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from scrollctx.errors import ConfigError, UsageError
from scrollctx.kernel._bridge import RESERVED_NAMES

__all__ = ["McpServerSpec", "mcp_prompt_line", "mcp_specs"]

Expose = Literal["kernel", "both"]
_RESERVED = RESERVED_NAMES | {"submit_answer"}
_KEYS = frozenset({"command", "args", "env", "url", "headers", "bearer_token_env_var", "timeout",
                   "startup_timeout", "expose"})  # fmt: skip


@dataclass(frozen=True, slots=True)
class McpServerSpec:
    """One MCP server: ``command`` to start over stdio, or ``url`` to reach over HTTP."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 30.0
    """Seconds one tool call may take before the server counts as not answering."""
    startup_timeout: float = 30.0
    """Seconds the server may take to start and list its tools."""
    expose: Expose = "kernel"

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or keyword.iskeyword(self.name) or self.name[0] == "_":
            raise UsageError(
                f"MCP server name {self.name!r} must be a Python identifier (it becomes "
                f"`{self.name}.tool(...)` in the kernel), e.g. git or time"
            )
        if self.name in _RESERVED:
            raise UsageError(f"MCP server name {self.name!r} is taken by the kernel; rename it")
        if bool(self.command) == bool(self.url):
            raise UsageError(f"MCP server {self.name!r} needs a command or a url, not both")
        if not (self.timeout > 0 and self.startup_timeout > 0):
            raise UsageError(f"MCP server {self.name!r}: timeouts must be positive")
        if self.expose not in ("kernel", "both"):
            raise UsageError(f"MCP server {self.name!r}: expose is 'kernel' or 'both'")

    @property
    def where(self) -> str:
        """The command line or URL, for messages."""
        return self.url or shlex.join(self.command)

    @classmethod
    def parse(cls, text: str) -> McpServerSpec:
        """Parse ``NAME=COMMAND ARGS`` (split like a shell) or ``NAME=http(s)://HOST/PATH``.

        Example: ``McpServerSpec.parse("git=mcp-server-git --repository .")``
        """
        name, sep, target = text.partition("=")
        target = target.strip()
        if not sep or not target:
            raise UsageError(
                f"--mcp takes NAME=COMMAND ARGS or NAME=URL, e.g. 'time=mcp-server-time'; "
                f"got {text!r}"
            )
        if target.startswith(("http://", "https://")):
            return cls(name.strip(), url=target)
        try:
            command = tuple(shlex.split(target))
        except ValueError as exc:
            raise UsageError(f"--mcp {text!r}: {exc}") from exc
        return cls(name.strip(), command=command)

    @classmethod
    def from_config(
        cls, name: str, table: object, *, environ: Mapping[str, str] | None = None
    ) -> McpServerSpec:
        """Build a spec from a ``[mcp.servers.NAME]`` table (see the module docstring)."""
        where = f"[mcp.servers.{name}]"
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where} must be a table")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: "
                              f"{', '.join(sorted(_KEYS))}")  # fmt: skip
        command = _strings(table.get("command", ()), f"{where} command")
        command += _strings(table.get("args", ()), f"{where} args")
        headers = dict(_string_table(table.get("headers", {}), f"{where} headers"))
        token_var = table.get("bearer_token_env_var")
        if token_var is not None:
            env = os.environ if environ is None else environ
            token = env.get(str(token_var))
            if not token:
                raise ConfigError(f"{where}: the variable {token_var} is not set")
            headers["Authorization"] = f"Bearer {token}"
        try:
            return cls(
                name,
                command=command,
                url=table.get("url"),
                env=_string_table(table.get("env", {}), f"{where} env"),
                headers=headers,
                timeout=float(table.get("timeout", 30.0)),
                startup_timeout=float(table.get("startup_timeout", 30.0)),
                expose=table.get("expose", "kernel"),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: {exc}") from exc


def mcp_specs(
    flags: Iterable[str], settings: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> list[McpServerSpec]:
    """The servers of a run: ``[mcp.servers.*]`` from the config, then ``--mcp`` flags.

    A flag with the name of a configured server replaces it.
    """
    section = settings.get("mcp", {})
    servers = section.get("servers", {}) if isinstance(section, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ConfigError("[mcp] must hold [mcp.servers.NAME] tables")
    specs = {name: McpServerSpec.from_config(name, table, environ=environ)
             for name, table in servers.items()}  # fmt: skip
    for flag in flags:
        spec = McpServerSpec.parse(flag)
        specs[spec.name] = spec
    return list(specs.values())


def mcp_prompt_line(names: Sequence[str]) -> str:
    """The system prompt's line about MCP tools (the tools themselves are listed per request)."""
    shown = ", ".join(f"`{name}`" for name in names)
    return (
        f"- the tools of the MCP servers {shown}, called as `SERVER.tool(arg=...)`: the ones "
        "callable now are listed at the end of your context, after the namespace digest"
    )


def _strings(value: object, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where} must be a string or a list of strings")


def _string_table(value: object, where: str) -> dict[str, str]:
    if isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values()):
        return {str(k): v for k, v in value.items()}
    raise ConfigError(f"{where} must be a table of strings")
