"""Bench reports in the browser: ``scroll bench report`` of each result file, as one page.

The report is the bench's own (:func:`scrollctx.bench.write_report`: its Markdown, its tables,
its matplotlib plots), written into a scratch folder the inspector owns (never beside the
result file) and shown here: Markdown headings, paragraphs, tables and plot links become HTML;
nothing else is rendered. Result files are the ``*.jsonl`` files under ``--results DIR``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scrollctx.errors import UsageError

__all__ = ["Block", "BenchReports"]

_IMAGE = re.compile(r"^!\[([^\]]*)\]\(([^)]+)\)$")


@dataclass(frozen=True, slots=True)
class Block:
    """One block of the report: a heading, a paragraph, a table or an image."""

    kind: str
    text: str = ""
    level: int = 0
    rows: tuple[tuple[str, ...], ...] = ()


class BenchReports:
    """The result files under one folder and their reports, rendered on demand and cached."""

    def __init__(self, results_dir: Path | None, scratch: Path) -> None:
        self.results_dir = results_dir
        self.scratch = scratch
        self._made: dict[str, tuple[float, Path]] = {}
        self._renders = 0

    def files(self) -> list[str]:
        """The result files, as paths relative to the results folder."""
        if self.results_dir is None or not self.results_dir.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.results_dir)) for p in self.results_dir.rglob("*.jsonl")
        )

    def report(self, name: str) -> list[Block]:
        """The report of result file ``name`` as blocks (rendered once per file version).

        Raises:
            UsageError: ``name`` is not one of :meth:`files`, or holds no records.
        """
        folder = self._folder(name)
        text = (folder / "report.md").read_text(encoding="utf-8")
        return parse_markdown(text)

    def plot(self, name: str, image: str) -> bytes:
        """A plot of the report of ``name`` (one of the PNG files the report links)."""
        folder = self._folder(name)
        path = folder / image
        if "/" in image or not image.endswith(".png") or not path.is_file():
            raise UsageError(f"the report of {name} has no plot {image!r}")
        return path.read_bytes()

    def _folder(self, name: str) -> Path:
        if name not in self.files() or self.results_dir is None:
            raise UsageError(f"no result file {name!r} under the results folder")
        source = self.results_dir / name
        version = source.stat().st_mtime
        made = self._made.get(name)
        if made is None or made[0] != version:
            from scrollctx.bench import write_report

            self._renders += 1
            folder = self.scratch / f"report-{self._renders}"
            write_report([source], folder)
            made = self._made[name] = (version, folder)
        return made[1]


def parse_markdown(text: str) -> list[Block]:
    """Headings, tables, images and paragraphs of the bench's Markdown (nothing else)."""
    blocks: list[Block] = []
    table: list[tuple[str, ...]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = tuple(cell.strip().strip("*") for cell in line.strip("|").split("|"))
            if not all(set(cell) <= set("-:") for cell in cells):
                table.append(cells)
            continue
        if table:
            blocks.append(Block("table", rows=tuple(table)))
            table = []
        if not line.strip():
            continue
        heading = len(line) - len(line.lstrip("#"))
        image = _IMAGE.match(line.strip())
        if heading and line[heading : heading + 1] == " ":
            blocks.append(Block("heading", line[heading + 1 :], level=heading))
        elif image:
            blocks.append(Block("image", image.group(2), rows=((image.group(1),),)))
        else:
            blocks.append(Block("paragraph", line.replace("`", "")))
    if table:
        blocks.append(Block("table", rows=tuple(table)))
    return blocks
