"""The shared model options (``cli/_models.py``): one bundle, the same on every model command."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner

from scrollctx.cli import build_cli
from scrollctx.cli._models import ModelCall, model_options
from scrollctx.errors import UsageError


@click.command()
@model_options
@click.option("--other", default="x")
def show(model_call: ModelCall, other: str) -> None:
    """Print the bundle as JSON (a command built for this test)."""
    data: dict[str, Any] = {
        "model": model_call.model,
        "base_url": model_call.base_url,
        "has_key": model_call.api_key is not None,
        "options": model_call.backend_options(),
        "other": other,
    }
    click.echo(json.dumps(data))


def test_the_flags_arrive_as_one_bundle() -> None:
    done = CliRunner().invoke(
        show,
        ["--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--api-key", "k",
         "--max-tokens", "77", "--timeout", "2.5", "--other", "y"],
        catch_exceptions=False,
    )  # fmt: skip

    assert json.loads(done.output) == {
        "model": "openai:m",
        "base_url": "http://127.0.0.1:9/v1",
        "has_key": True,
        "options": {"max_tokens": 77, "timeout": 2.5},
        "other": "y",
    }


def test_unset_flags_set_no_options_and_the_model_comes_from_the_environment() -> None:
    done = CliRunner().invoke(show, [], env={"SCROLL_MODEL": "anthropic:c"})

    assert json.loads(done.output)["model"] == "anthropic:c"
    assert json.loads(done.output)["options"] == {}
    assert "secret" not in repr(ModelCall(api_key="secret"))


@pytest.mark.parametrize("flags", [["--max-tokens", "0"], ["--timeout", "0"]])
def test_nonsense_limits_are_usage_errors(flags: list[str]) -> None:
    done = CliRunner().invoke(show, flags)
    assert done.exit_code == 2 and "Invalid value" in done.output


def test_the_endpoint_goes_into_the_chosen_providers_variables() -> None:
    environ = ModelCall(model="anthropic:c", base_url="http://h/", api_key="k").environ()
    assert (environ["ANTHROPIC_BASE_URL"], environ["ANTHROPIC_API_KEY"]) == ("http://h/", "k")
    with pytest.raises(UsageError, match="apply to openai: and anthropic: models"):
        ModelCall(model="local", base_url="http://h/").environ()


@pytest.mark.parametrize("command", [["ask"], ["run"], ["chat"], ["bench", "run"]])
def test_every_model_command_has_the_bundle(command: list[str]) -> None:
    group = build_cli()
    ctx = click.Context(group)
    target: Any = group
    for name in command:
        target = target.get_command(ctx, name)
    flags = {opt for param in target.params for opt in param.opts}
    assert {"--model", "--base-url", "--api-key", "--max-tokens", "--timeout"} <= flags
