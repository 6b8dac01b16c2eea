"""Project-wide rules that keep the code base honest: layering, public surface, help text."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import click
import pytest

import scrollctx
from scrollctx.cli import build_cli
from scrollctx.cli._app import Bounded

SRC = Path(scrollctx.__file__).parent
LAYERS = ["log", "surface", "kernel", "view", "agent", "ingest", "bench", "serve"]
ROOT_MODULES = {"errors", "config", "_types", "_lazy"}


def _imported_scrollctx_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] == "scrollctx"}
    return found


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_import_only_downwards(layer: str) -> None:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1]) | ROOT_MODULES
    upward = []
    for path in (SRC / layer).rglob("*.py"):
        for module in _imported_scrollctx_modules(path):
            parts = module.split(".")
            target = parts[1] if len(parts) > 1 else ""
            if target not in allowed:
                upward.append(f"{path.relative_to(SRC)} imports {module}")
    assert upward == []


def test_nothing_imports_the_cli() -> None:
    offenders = [
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "cli" not in path.relative_to(SRC).parts
        and any(m.startswith("scrollctx.cli") for m in _imported_scrollctx_modules(path))
    ]
    assert offenders == []


def _packages() -> list[str]:
    names = ["scrollctx"]
    names += [f"scrollctx.{layer}" for layer in LAYERS if (SRC / layer / "__init__.py").exists()]
    return names


@pytest.mark.parametrize("name", _packages())
def test_public_names_are_sorted_and_resolvable(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


def test_package_imports_without_optional_dependencies() -> None:
    code = (
        "import sys, scrollctx, scrollctx.log, scrollctx.surface, scrollctx.cli;"
        "bad = [m for m in ('anthropic','mcp','psycopg','llama_cpp','matplotlib','rank_bm25',"
        "'numpy','onnxruntime','tokenizers','bm25s')"
        " if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, f"scroll {prefix}{name} is listed but does not load"
        found.append((f"{prefix}{name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix}{name} ")
    return found


@pytest.mark.parametrize("name,command", _commands(build_cli()))
def test_every_command_has_help_and_an_example(name: str, command: click.Command) -> None:
    assert command.help and command.help.strip().splitlines()[0], f"scroll {name} has no help"
    if not isinstance(command, click.Group):
        assert "Example" in command.help, f"scroll {name} help shows no example"


@pytest.mark.parametrize("name,command", _commands(build_cli()))
def test_every_number_option_refuses_nan(name: str, command: click.Command) -> None:
    # NaN passes every comparison, so every bound of a click.FloatRange: `scroll serve
    # --body-seconds nan` started a server whose every request failed with a traceback.
    for param in command.params:
        if isinstance(param.type, click.FloatRange):
            assert isinstance(param.type, Bounded), f"scroll {name} {param.name}: use Bounded"
            with pytest.raises(click.BadParameter, match="'nan' is not a number"):
                param.type.convert("nan", param, None)


def test_a_command_loads_only_its_own_module() -> None:
    # ``scroll search`` must not pay for the agent, the backends or the bench at start-up.
    code = (
        "import sys; from scrollctx.cli import run; run(['search', '--help']);"
        "loaded = [m for m in ('scrollctx.agent', 'scrollctx.bench', 'scrollctx.cli._agent',"
        " 'scrollctx.cli._bench', 'openai') if m in sys.modules];"
        "print('LOADED', ','.join(loaded))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "LOADED"


def test_help_lists_every_command_with_its_summary() -> None:
    from scrollctx.cli import COMMANDS

    out = subprocess.run(
        [sys.executable, "-c", "from scrollctx.cli import run; run(['--help'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == set(COMMANDS)
