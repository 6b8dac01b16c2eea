"""The working-view options every agent command shares, defined once.

``@view_options`` adds ``--budget-tokens``, ``--rho``, ``--index-k``, ``--tail-groups``,
``--keep-results`` and ``--prompts`` to a command and hands it one :class:`ViewFlags`
(parameter ``view_flags``). ``scroll ask``, ``run``, ``chat`` and ``bench run`` use it. A knob
not given falls back to ``[view]`` in ``<store>/config.toml``, then to its default
(:class:`scrollctx.view.ViewSettings`); the window C, when neither says, comes from the model's
window (:mod:`scrollctx.agent._windows`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from scrollctx.cli._app import Bounded
from scrollctx.cli._bundles import option_bundle

__all__ = ["ViewFlags", "view_options"]


@dataclass(frozen=True, slots=True)
class ViewFlags:
    """What the view flags of one command said (``None``: not given)."""

    budget_tokens: int | None = None
    rho: float | None = None
    index_k: int | None = None
    tail_groups: int | None = None
    keep_results: int | None = None
    prompts: Path | None = None

    def agent_settings(self) -> dict[str, Any]:
        """The matching :class:`~scrollctx.agent.Agent` keyword arguments."""
        return {
            "budget_tokens": self.budget_tokens,
            "rho": self.rho,
            "k": self.index_k,
            "tail_groups": self.tail_groups,
            "keep_results": self.keep_results,
            "prompts": self.prompts,
        }


_OPTIONS = (
    click.option("--budget-tokens", "budget_tokens", type=click.IntRange(min=1024), metavar="N",
                 help="The context window C (default: the model's window; config: [view])."),
    click.option("--rho", "rho", type=Bounded(min=0, max=1, min_open=True),
                 metavar="R", help="Evict above R x C (default 0.8)."),
    click.option("--index-k", "index_k", type=click.IntRange(min=3), metavar="K",
                 help="Tier width of the eviction index (default 4)."),
    click.option("--tail-groups", "tail_groups", type=click.IntRange(min=0), metavar="N",
                 help="Newest exchanges eviction never touches (default 2)."),
    click.option("--keep-results", "keep_results", type=click.IntRange(min=0), metavar="N",
                 help="Newest tool results eviction never folds (default 3)."),
    click.option("--prompts", "prompts", metavar="DIR",
                 type=click.Path(exists=True, file_okay=False, path_type=Path),
                 help="Folder of prompt files (system.md, rules.md, rubric_*.md...) "
                 "replacing ours."),
)  # fmt: skip


view_options = option_bundle(ViewFlags, _OPTIONS, "view_flags")
"""Add the view options to a command; it receives them as ``view_flags: ViewFlags``."""
