"""The ``scroll`` command: the group, shared option bundles, output helpers and exit codes.

Exit codes are decided in one place, :func:`invoke`, from ``ScrollError.exit_code``: 0 success
(including "no results"), 1 operational error, 2 usage or configuration error, 3 integrity
problem in a store, 130 interrupted. A broken pipe exits quietly.

Every command writes through :func:`emit`, :func:`echo` and :func:`warn` (a test refuses
``click.echo`` or ``print`` anywhere else under ``cli/``): on a terminal they show untrusted
characters escaped (:func:`terminal_safe`), so logged cell output, imported transcripts and model
text can never drive the user's terminal; piped output stays exact.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from scrollctx.config import Config, resolve_config
from scrollctx.errors import ScrollError, UsageError
from scrollctx.log import escape_unsafe, unsafe_characters

__all__ = [
    "Bounded",
    "LazyGroup",
    "echo",
    "emit",
    "invoke",
    "json_option",
    "make_group",
    "read_token",
    "sandbox_options",
    "store_option",
    "terminal_safe",
    "token_options",
    "warn",
]

F = TypeVar("F", bound=Callable[..., Any])


class Bounded(click.FloatRange):
    """A number within bounds, NaN refused: NaN passes every comparison, so every bound of a
    ``click.FloatRange`` (``--body-seconds nan`` started a server that failed every request)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


class LazyGroup(click.Group):
    """A click group whose commands are imported only when they are used.

    ``lazy`` maps each command name to ``"module:attribute"``. Running ``scroll search`` imports
    the history commands and nothing else (not the agent, not the bench); ``--help`` imports
    every module once, to show each command's one-line help.
    """

    def __init__(self, *args: Any, lazy: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            module, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


def make_group(lazy: Mapping[str, str] | None = None) -> click.Group:
    """Create the ``scroll`` group; ``lazy`` names its commands (see :class:`LazyGroup`)."""

    @click.group(
        cls=LazyGroup,
        lazy=lazy,
        context_settings={"help_option_names": ["-h", "--help"]},
        invoke_without_command=True,
    )
    @click.version_option(package_name="scrollctx", prog_name="scroll")
    @click.option("--debug", is_flag=True, envvar="SCROLL_DEBUG", help="Show tracebacks.")
    @click.pass_context
    def scroll(ctx: click.Context, debug: bool) -> None:
        """Scroll: a lossless Event Log, a sandboxed kernel and a bounded working view for agents.

        Example: scroll ingest ../shared/data/locomo/locomo10.json && scroll search "adoption"
        """
        if ctx.invoked_subcommand is None:  # bare `scroll`: the help, and success
            click.echo(ctx.get_help())

    return scroll


def store_option(func: F) -> F:
    """Add ``--store DIR|URL`` (env ``SCROLL_STORE``, default ``./.scroll``), as ``config``."""

    def _to_config(ctx: click.Context, param: click.Parameter, value: str | None) -> Config:
        return resolve_config(value)

    return click.option(
        "--store",
        "config",
        metavar="DIR|URL",
        envvar="SCROLL_STORE",
        callback=_to_config,
        help="Store folder or postgresql:// URL (default ./.scroll; env SCROLL_STORE).",
    )(func)


def json_option(func: F) -> F:
    """Add ``--json``: print exactly one JSON document to stdout."""
    return click.option("--json", "json_", is_flag=True, help="Print one JSON document.")(func)


def emit(data: Any, *, as_json: bool, human: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON or through its human renderer; stdout carries data only.

    On a terminal both are made safe: the human text by :func:`terminal_safe`, the JSON by
    writing those characters as JSON escapes (the document still parses to the same data).
    """
    if as_json:
        text = json.dumps(data, ensure_ascii=False, default=str)
        click.echo(_json_safe(text) if sys.stdout.isatty() else text)
    else:
        text = human(data)
        if text:
            echo(text)


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print text to stdout (stderr with ``err``), escaped by :func:`terminal_safe` on a tty."""
    stream = sys.stderr if err else sys.stdout
    click.echo(terminal_safe(text, is_terminal=stream.isatty()), err=err, nl=nl)


def terminal_safe(text: str, *, is_terminal: bool) -> str:
    """Escape characters that could drive or deceive a terminal, in text bound for one.

    Cell output, logged history and model text are untrusted: an escape sequence could retitle
    the window or write the clipboard (OSC 52), a bidi control could reorder what is shown, a
    zero-width character hide text. Every character of Unicode category Cc (but newline and
    tab), Cf, Zl, Zp or Cs is shown as ``\\x1b``, ``\\u202e`` or ``\\U000e0041``. Piped output
    keeps the exact text.
    """
    return escape_unsafe(text) if is_terminal else text


def warn(message: str) -> None:
    """Write a warning to stderr (never stdout), escaped on a terminal."""
    echo(message, err=True)


def _json_safe(text: str) -> str:
    """Write the unsafe characters of a JSON document as JSON escapes (they only occur inside
    strings, the structure being ASCII), so it decodes to exactly the same value."""
    return unsafe_characters().sub(lambda m: _json_escape(ord(m.group())), text)


def _json_escape(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def invoke(group: click.Group, args: Sequence[str] | None = None) -> int:
    """Run the CLI and map every outcome to an exit code; never show a traceback by default."""
    argv = list(sys.argv[1:] if args is None else args)
    as_json = "--json" in argv
    debug = "--debug" in argv or os.environ.get("SCROLL_DEBUG", "").lower() in {"1", "true"}
    try:
        # With standalone_mode=False, click returns ctx.exit(n)'s code instead of raising it.
        outcome = group.main(args=argv, prog_name="scroll", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        return 130
    except KeyboardInterrupt:
        return 130
    except click.ClickException as exc:
        return _fail(type(exc).__name__, exc.format_message(), exc.exit_code, as_json)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except ScrollError as exc:
        if debug:
            raise
        return _fail(type(exc).__name__, str(exc), exc.exit_code, as_json)
    except Exception as exc:  # noqa: BLE001 - last resort: one line plus a hint, not a traceback
        if debug:
            raise
        message = f"unexpected {type(exc).__name__}: {exc} (rerun with --debug for the traceback)"
        return _fail("InternalError", message, 1, as_json)
    return outcome if isinstance(outcome, int) else 0


def _fail(kind: str, message: str, code: int, as_json: bool) -> int:
    # The message may quote untrusted text (a query, a path, a model's reply): JSON escapes
    # every control character, and ensure_ascii the rest.
    if as_json:
        click.echo(json.dumps({"error": {"type": kind, "message": message}}), err=True)
    else:
        warn(f"Error: {message}")
    return code


def _silence_stdout() -> None:
    # After a broken pipe, Python would complain again while flushing stdout at exit.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def read_token(token: str | None, token_file: Path | None) -> str | None:
    """The token a server requires, from ``--token`` or ``--token-file`` (one of them).

    Raises:
        UsageError: both were given, or the file cannot be read or is empty.
    """
    if token is not None and token_file is not None:
        raise UsageError("pass the token with --token or with --token-file, not both")
    if token_file is None:
        return token or None
    try:
        text = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the token file {token_file}: {exc}") from exc
    if not text:
        raise UsageError(f"the token file {token_file} is empty")
    return text


def sandbox_options(what: str) -> Callable[[F], F]:
    """Add ``--sandbox`` and ``--without`` for the kernel that runs ``what``; the command gets
    them as one ``sandbox: SandboxPolicy``."""
    from scrollctx.kernel import LAYERS, PROFILES, SandboxPolicy

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def bundled(*args: Any, **kwargs: Any) -> Any:
            profile, without = kwargs.pop("sandbox"), kwargs.pop("without")
            policy = SandboxPolicy(profile, unavailable=frozenset(without))
            return func(*args, sandbox=policy, **kwargs)

        command: Any = click.option(
            "--without", multiple=True, type=click.Choice(LAYERS),
            envvar="SCROLL_SANDBOX_WITHOUT", help="Treat a sandbox layer as missing here.",
        )(bundled)  # fmt: skip
        command = click.option(
            "--sandbox", type=click.Choice(PROFILES), default="strict", show_default=True,
            help=f"{what} sandbox; anything but strict is an opt-out (logged, and shown).",
        )(command)  # fmt: skip
        return command  # type: ignore[no-any-return]

    return decorate


def kernel_pool_options(unit: str) -> Callable[[F], F]:
    """Add ``--idle-timeout`` and ``--max-kernels`` for a server that keeps one kernel per
    ``unit`` (a client session, a conversation): the command gets both as they are."""

    def decorate(func: F) -> F:
        command: Any = click.option(
            "--max-kernels", type=click.IntRange(min=1), default=8, show_default=True,
            help=f"Kernels (one per {unit}) alive at once.",
        )(func)  # fmt: skip
        command = click.option(
            "--idle-timeout", type=Bounded(min=1), default=900.0, show_default=True,
            help=f"Seconds a {unit}'s kernel may sit unused before it is closed.",
        )(command)  # fmt: skip
        return command  # type: ignore[no-any-return]

    return decorate


def token_options(envvar: str) -> Callable[[F], F]:
    """Add ``--token`` (env ``envvar``) and ``--token-file``; the command gets ``token``.

    The token is what an HTTP server requires of every request (:func:`read_token`).
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def bundled(*args: Any, **kwargs: Any) -> Any:
            token = read_token(kwargs.pop("token"), kwargs.pop("token_file"))
            return func(*args, token=token, **kwargs)

        command: Any = click.option(
            "--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
            help="Read the token from this file instead.",
        )(bundled)  # fmt: skip
        command = click.option(
            "--token", envvar=envvar, default=None,
            help=f"The token every request must carry (env {envvar}).",
        )(command)  # fmt: skip
        return command  # type: ignore[no-any-return]

    return decorate
