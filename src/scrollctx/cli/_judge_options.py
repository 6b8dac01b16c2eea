"""The judge's options of ``scroll bench run``, defined once, apart from the backbone's.

``@judge_options`` adds ``--judge-model``, ``--judge-base-url``, ``--judge-api-key``,
``--judge-max-tokens``, ``--judge-option KEY=VALUE``, ``--judge-prompts DIR`` and the BEAM
scoring switches, and hands the command one :class:`JudgeFlags` (parameter ``judge_flags``).
The judge's endpoint is its own: ``--judge-base-url`` / ``--judge-api-key``, else the
environment and config.toml as for any model, never the backbone's ``--base-url`` /
``--api-key``; its key travels in the environment mapping only (never in a record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._bundles import option_bundle
from scrollctx.cli._models import ModelCall, parse_options
from scrollctx.config import Config

__all__ = ["JudgeFlags", "judge_options"]


@dataclass(frozen=True, slots=True)
class JudgeFlags:
    """What the judge flags of ``bench run`` said."""

    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_api_key: str | None = field(default=None, repr=False)
    judge_max_tokens: int = 512
    judge_options: tuple[str, ...] = ()
    judge_prompts: Path | None = None
    beam_integer_cast: bool = True
    beam_ordering_match: str = "pairwise"
    beam_ordering_rank: str = "all-lines"

    def build(self, config: Config) -> Any:
        """The :class:`~scrollctx.bench.Judge`, or ``None`` without ``--judge-model``; the
        prompt files and options are checked here, before any question runs."""
        from scrollctx.agent import resolve_model
        from scrollctx.bench import Judge, JudgePrompts

        prompts = JudgePrompts.load(self.judge_prompts)
        options = parse_options(self.judge_options, "--judge-option")
        if self.judge_model is None:
            return None
        endpoint = ModelCall(
            model=self.judge_model, base_url=self.judge_base_url, api_key=self.judge_api_key
        )
        backend = resolve_model(self.judge_model, config=config, environ=endpoint.environ())
        backend.options.merged({k: v for k, v in options.items() if k != "max_tokens"})
        return Judge(
            backend,
            max_tokens=self.judge_max_tokens,
            beam_integer_cast=self.beam_integer_cast,
            ordering_match=self.beam_ordering_match,
            ordering_rank=self.beam_ordering_rank,
            prompts=prompts,
            options=options,
        )


_OPTIONS = (
    click.option("--judge-model", "judge_model", metavar="SPEC",
                 help="Judge model (needed for BEAM, LongMemEval; LoCoMo J with it)."),
    click.option("--judge-base-url", "judge_base_url", metavar="URL",
                 help="The judge's own endpoint (else its env/config, not the backbone's)."),
    click.option("--judge-api-key", "judge_api_key", metavar="KEY",
                 help="Key for the judge's endpoint (never recorded)."),
    click.option("--judge-max-tokens", "judge_max_tokens", type=click.IntRange(min=1),
                 default=512, show_default=True,
                 help="Reply budget of each judge call (LongMemEval's own scorer: 10)."),
    click.option("--judge-option", "judge_options", multiple=True, metavar="KEY=VALUE",
                 help="Any option of the judge's calls, repeatable (e.g. temperature=0)."),
    click.option("--judge-prompts", "judge_prompts", metavar="DIR",
                 type=click.Path(path_type=Path),
                 help="Folder of judge prompt files replacing ours (docs/evaluation.md)."),
    click.option("--beam-integer-cast/--no-beam-integer-cast", "beam_integer_cast",
                 default=True, show_default=True,
                 help="Truncate BEAM item scores to integers as BEAM's reference code does."),
    click.option("--beam-ordering-match", "beam_ordering_match",
                 type=click.Choice(["pairwise", "batch"]), default="pairwise",
                 show_default=True,
                 help="BEAM event ordering: match each answer line to an event by one yes/no "
                 "call per line and event, as BEAM does (pairwise), or all in one (batch)."),
    click.option("--beam-ordering-rank", "beam_ordering_rank",
                 type=click.Choice(["all-lines", "matched-lines"]), default="all-lines",
                 show_default=True,
                 help="BEAM event ordering: rank every answer line, as BEAM does (all-lines), "
                 "or only the lines matched to an event (matched-lines)."),
)  # fmt: skip


judge_options = option_bundle(JudgeFlags, _OPTIONS, "judge_flags")
"""Add the judge options to a command; it receives them as ``judge_flags: JudgeFlags``."""
