"""The backend registry, strict options, and where endpoint settings come from."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scripted_servers import ScriptedOpenAIServer

from needs import import_or_missing
from scrollctx.agent import (
    Backend,
    BackendOptions,
    ChatRequest,
    Completion,
    register,
    resolve_model,
    unregister,
)
from scrollctx.agent.backends import _registry, backend_class, backend_names, resolve_cache_dir
from scrollctx.agent.backends._openai import OpenAIBackend
from scrollctx.config import resolve_config
from scrollctx.errors import ConfigError, MissingCredentials, UsageError


@dataclass(frozen=True, slots=True)
class EchoOptions(BackendOptions):
    prefix: str = ""
    repeat: int = 1
    loud: bool = False
    ratio: float | None = None
    stop: tuple[str, ...] | None = None


class EchoBackend(Backend):
    """Test double: answers with the last user message, prefixed and repeated per options."""

    name = "echo"
    Options = EchoOptions

    def complete(self, request: ChatRequest) -> Completion:
        options = self.options.merged(request.options)
        assert isinstance(options, EchoOptions)
        text = options.prefix + (request.messages[-1]["content"] or "") * options.repeat
        return Completion(
            text=text.upper() if options.loud else text, model=self.model, backend="echo"
        )


@pytest.fixture
def echo() -> Iterator[None]:
    register("echo", EchoBackend)
    yield
    unregister("echo")


def test_a_registered_backend_resolves_and_unregisters(echo: None) -> None:
    backend = resolve_model("echo:v1", options={"prefix": "> "})

    assert isinstance(backend, EchoBackend) and backend.model == "v1"
    answer = backend.complete(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
    assert answer.text == "> hi"
    assert "echo" in backend_names()
    unregister("echo")
    with pytest.raises(UsageError, match="unknown backend 'echo'"):
        resolve_model("echo")
    register("echo", EchoBackend)  # for the fixture's teardown


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        resolve_model("gpt-4o")

    message = str(caught.value)
    assert "unknown backend 'gpt-4o'" in message
    assert "anthropic, local, openai" in message and "openai:gpt-4o-mini" in message


def test_names_are_not_taken_twice_unless_replaced(echo: None) -> None:
    with pytest.raises(UsageError, match="already registered"):
        register("echo", EchoBackend)
    with pytest.raises(UsageError, match="without ':'"):
        register("a:b", EchoBackend)
    with pytest.raises(UsageError, match="no backend named"):
        unregister("never-registered")


def test_replacing_a_builtin_and_unregistering_restores_it() -> None:
    register("openai", EchoBackend, replace=True)
    try:
        assert backend_class("openai") is EchoBackend
    finally:
        unregister("openai")
    assert backend_class("openai") is OpenAIBackend


def test_string_targets_import_on_first_use_and_bad_ones_fail_clearly() -> None:
    register("echo-str", f"{__name__}:EchoBackend")
    register("missing", "scrollctx.no_such_module:Thing")
    register("not-backend", "scrollctx.config:Config")
    try:
        assert backend_class("echo-str") is EchoBackend
        with pytest.raises(ConfigError, match="cannot be imported"):
            backend_class("missing")
        with pytest.raises(ConfigError, match="not a Backend subclass"):
            backend_class("not-backend")
    finally:
        for name in ("echo-str", "missing", "not-backend"):
            unregister(name)


def test_entry_point_plugins_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    dist = site / "scroll_echo_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: scroll-echo-plugin\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[scrollctx.backends]\n"
        "plugin-echo = scroll_echo_plugin:PluginEcho\n"
        "openai = scroll_echo_plugin:PluginEcho\n"
    )
    (site / "scroll_echo_plugin.py").write_text(
        "from scrollctx.agent import Backend, Completion\n"
        "class PluginEcho(Backend):\n"
        "    name = 'plugin-echo'\n"
        "    def complete(self, request):\n"
        "        return Completion(text='from plugin')\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_registry, "_plugins_loaded", False)
    monkeypatch.setattr(_registry, "_targets", dict(_registry._BUILTINS))
    monkeypatch.setattr(_registry, "_resolved", {})

    with pytest.warns(UserWarning, match="ignoring plugin backend 'openai'"):
        names = backend_names()

    assert "plugin-echo" in names
    backend = resolve_model("plugin-echo")
    assert backend.complete(ChatRequest(messages=[])).text == "from plugin"
    assert backend_class("openai") is OpenAIBackend
    assert backend_names() == names  # read once: no second warning, same answer


# -- options -----------------------------------------------------------------------------------


def test_options_reject_unknown_keys_and_name_the_valid_ones() -> None:
    with pytest.raises(UsageError) as caught:
        EchoOptions.from_mapping({"prefx": "x", "repat": 2})

    assert str(caught.value) == (
        "unknown options prefx, repat for EchoOptions; "
        "valid options: loud, prefix, ratio, repeat, stop"
    )


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"repeat": "2"}, "repeat='2' for EchoOptions must be int"),
        ({"repeat": True}, "must be int"),
        ({"loud": 1}, "must be bool"),
        ({"ratio": "high"}, "must be float or None"),
    ],
)
def test_options_reject_wrong_types(values: dict[str, Any], problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        EchoOptions.from_mapping(values)


def test_options_coerce_only_what_is_safe() -> None:
    options = EchoOptions.from_mapping({"ratio": 2, "stop": ["a", "b"]})

    assert options.ratio == 2.0 and isinstance(options.ratio, float)
    assert options.stop == ("a", "b")
    assert options.merged({"repeat": 3}).repeat == 3 and options.repeat == 1


# -- settings precedence -------------------------------------------------------------------------


def write_config(store: Path, text: str) -> None:
    (store / "config.toml").write_text(text)


def test_argument_beats_environment_beats_config_beats_default(store_dir: Path) -> None:
    write_config(
        store_dir,
        '[backends.openai]\nmodel = "cfg-model"\nbase_url = "http://cfg/v1"\napi_key = "cfg-key"\n'
        "[backends.openai.options]\ntemperature = 0.3\n",
    )
    config = resolve_config(store_dir, environ={})
    env = {"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "env-key"}

    from_config = resolve_model("openai", config=config, environ={})
    from_env = resolve_model("openai", config=config, environ=env)
    from_flag = resolve_model("openai:flag-model", config=config, environ=env)
    default = resolve_model("openai", environ={"OPENAI_API_KEY": "k"})

    assert (from_config.model, from_config.base_url) == ("cfg-model", "http://cfg/v1")
    assert from_config.options.temperature == 0.3  # type: ignore[attr-defined]
    assert (from_env.model, from_env.base_url) == ("cfg-model", "http://env/v1")
    assert from_flag.model == "flag-model"
    assert (default.model, default.base_url) == ("gpt-4o-mini", "https://api.openai.com/v1")
    for backend in (from_config, from_env, from_flag, default):
        backend.close()


def test_the_key_in_use_follows_the_same_precedence(
    store_dir: Path, openai_server: ScriptedOpenAIServer
) -> None:
    write_config(
        store_dir,
        f'[backends.openai]\nbase_url = "{openai_server.base_url}"\napi_key = "cfg-key"\n',
    )
    config = resolve_config(store_dir, environ={})
    for environ, expected in [({}, "cfg-key"), ({"OPENAI_API_KEY": "env-key"}, "env-key")]:
        openai_server.enqueue_text("ok")
        with resolve_model("openai:m", config=config, environ=environ) as backend:
            backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))
        assert openai_server.requests[-1].headers["authorization"] == f"Bearer {expected}"


def test_a_local_server_needs_no_key(openai_server: ScriptedOpenAIServer) -> None:
    openai_server.enqueue_text("hi from a local server")

    with resolve_model(
        "openai:qwen2.5:7b", environ={"OPENAI_BASE_URL": openai_server.base_url}
    ) as backend:
        answer = backend.complete(ChatRequest(messages=[{"role": "user", "content": "x"}]))

    assert answer.text == "hi from a local server"
    assert openai_server.requests[0].body["model"] == "qwen2.5:7b"


def test_missing_key_says_exactly_how_to_configure_it() -> None:
    with pytest.raises(MissingCredentials) as caught:
        resolve_model("openai:gpt-4o", environ={})

    message = str(caught.value)
    for advice in (
        "export OPENAI_API_KEY=",
        "--model openai:NAME",
        "OPENAI_BASE_URL",
        "config.toml",
    ):
        assert advice in message
    assert caught.value.exit_code == 2


def test_missing_anthropic_key_says_how_to_configure_it() -> None:
    import_or_missing("anthropic")
    with pytest.raises(MissingCredentials, match="export ANTHROPIC_API_KEY="):
        resolve_model("anthropic", environ={})


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('[backends.openai]\nmodle = "x"\n', "unknown key modle in \\[backends.openai\\]"),
        ('[backends]\nopenai = "x"\n', "must be a table"),
        (
            "[backends.openai]\napi_key = 3\n",
            "api_key in \\[backends.openai\\] of .* must be a quoted string",
        ),
        ('[backends.openai]\noptions = "x"\n', "options .* must be a table"),
        ("[backends.openai.options]\ntemprature = 1\n", "unknown option temprature"),
    ],
)
def test_bad_config_sections_are_clear_errors(store_dir: Path, text: str, problem: str) -> None:
    write_config(store_dir, text)
    config = resolve_config(store_dir, environ={})

    with pytest.raises(UsageError, match=problem):
        resolve_model("openai", config=config, environ={"OPENAI_API_KEY": "k"})


def test_importing_the_agent_layer_pulls_no_optional_sdk() -> None:
    code = (
        "import sys\n"
        "from scrollctx.agent import resolve_model\n"
        "resolve_model('openai:m', environ={'OPENAI_API_KEY': 'k'}).close()\n"
        "print(','.join(m for m in ('anthropic', 'llama_cpp') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_CACHE_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/scrollctx"),
        ({"HOME": "/home/u"}, "/home/u/.cache/scrollctx"),
        ({"XDG_CACHE_HOME": "", "HOME": "/home/u"}, "/home/u/.cache/scrollctx"),
    ],
)
def test_the_model_cache_folder(environ: dict[str, str], expected: str) -> None:
    assert resolve_cache_dir(environ) == Path(expected)


def test_an_empty_model_spec_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="names no backend"):
        resolve_model(":gpt-4o")
