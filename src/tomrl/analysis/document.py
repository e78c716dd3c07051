"""The report as data, rendered twice: self-contained HTML and Markdown with the same content.

    doc = Document("tomrl report", [Section("Detectors", [Paragraph("…"), Table([...], [[...]])])])
    write_document(doc, "reports/demo")   # report.md (links the PNGs), report.html (PNGs inlined)

Both renderers walk the same blocks, so the two files cannot drift apart: a paragraph, a table,
a figure (a PNG in the output folder) or a detector finding. The HTML embeds every PNG as base64
and uses no scripts or external styles, so it opens anywhere as one file.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from tomrl.analysis.detectors import INCONCLUSIVE, NOT_ENOUGH_DATA, DetectorResult
from tomrl.io import atomic_write_text


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    columns: list[str]
    rows: list[list[str]]
    caption: str = ""

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"table row {row!r} has {len(row)} cells for {len(self.columns)} columns")


@dataclass(frozen=True)
class Figure:
    file: str  # PNG file name, relative to the report folder
    caption: str


@dataclass(frozen=True)
class Finding:
    result: DetectorResult


Block = Union[Paragraph, Table, Figure, Finding]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section]
    preamble: list[Block] = field(default_factory=list)


def _verdict_label(result: DetectorResult) -> str:
    if result.fired:
        return "FIRED"
    if result.verdict == NOT_ENOUGH_DATA:
        return "not enough data"
    return result.verdict


def _finding_heading(result: DetectorResult) -> str:
    subject = f" — {result.subject}" if result.subject else ""
    return f"{result.title}{subject}: {_verdict_label(result)}"


# ---------------------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def _md_block(block: Block) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Table):
        lines = [f"*{block.caption}*", ""] if block.caption else []
        return lines + _md_table(block.columns, block.rows) + [""]
    if isinstance(block, Figure):
        return [f"![{block.caption}]({block.file})", "", f"*{block.caption}*", ""]
    if isinstance(block, Finding):
        result = block.result
        lines = [f"#### {_finding_heading(result)}", "", result.explanation, ""]
        if result.evidence:
            lines += _md_table(["evidence", "value"], [list(line) for line in result.evidence]) + [""]
        return lines
    raise TypeError(f"unknown block {block!r}")


def render_markdown(doc: Document) -> str:
    lines = [f"# {doc.title}", ""]
    for block in doc.preamble:
        lines += _md_block(block)
    for section in doc.sections:
        lines += [f"## {section.title}", ""]
        for block in section.blocks:
            lines += _md_block(block)
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------- HTML

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #1f2328; line-height: 1.45; }
h1 { border-bottom: 2px solid #d0d7de; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1.2em; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
figure { margin: 1em 0 1.5em; }
figure img { max-width: 100%; border: 1px solid #d0d7de; }
figcaption { font-style: italic; color: #57606a; }
.finding { border-left: 6px solid #8c959f; background: #f6f8fa; padding: .5em 1em; margin: 1em 0; }
.finding.fired { border-left-color: #cf222e; background: #fff5f5; }
.finding.clear { border-left-color: #1a7f37; background: #f5fff7; }
.finding h4 { margin: .3em 0; }
"""


def _html_table(columns: list[str], rows: list[list[str]], caption: str = "") -> str:
    parts = ["<table>"]
    if caption:
        parts.append(f"<caption>{html.escape(caption)}</caption>")
    parts.append("<tr>" + "".join(f"<th>{html.escape(str(c))}</th>" for c in columns) + "</tr>")
    for row in rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def _html_block(block: Block, folder: Path) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{html.escape(block.text)}</p>"
    if isinstance(block, Table):
        return _html_table(block.columns, block.rows, block.caption)
    if isinstance(block, Figure):
        png = (folder / block.file).read_bytes()
        data = base64.b64encode(png).decode("ascii")
        caption = html.escape(block.caption)
        return (f'<figure><img alt="{caption}" src="data:image/png;base64,{data}">'
                f"<figcaption>{caption}</figcaption></figure>")
    if isinstance(block, Finding):
        result = block.result
        kind = "fired" if result.fired else ("clear" if result.verdict != NOT_ENOUGH_DATA and not result.verdict.startswith(INCONCLUSIVE) else "")
        parts = [f'<div class="finding {kind}">', f"<h4>{html.escape(_finding_heading(result))}</h4>",
                 f"<p>{html.escape(result.explanation)}</p>"]
        if result.evidence:
            parts.append(_html_table(["evidence", "value"], [list(line) for line in result.evidence]))
        parts.append("</div>")
        return "\n".join(parts)
    raise TypeError(f"unknown block {block!r}")


def render_html(doc: Document, folder: str | Path) -> str:
    """The document as one HTML page; figures are read from ``folder`` and inlined."""
    folder = Path(folder)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(doc.title)}</title>", f"<style>{_STYLE}</style></head><body>",
             f"<h1>{html.escape(doc.title)}</h1>"]
    parts += [_html_block(block, folder) for block in doc.preamble]
    for section in doc.sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts += [_html_block(block, folder) for block in section.blocks]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_document(doc: Document, folder: str | Path, stem: str = "report") -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.html`` into ``folder`` (atomically); figures must be there already."""
    folder = Path(folder)
    markdown_path, html_path = folder / f"{stem}.md", folder / f"{stem}.html"
    atomic_write_text(markdown_path, render_markdown(doc))
    atomic_write_text(html_path, render_html(doc, folder))
    return markdown_path, html_path

