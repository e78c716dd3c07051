"""The report as data, rendered twice: self-contained HTML and Markdown with the same content.

    doc = Document("tomrl report", [Section("Detectors", [Paragraph("…"), Table([...], [[...]])])])
    write_document(doc, "reports/demo")   # report.md (links the PNGs), report.html (PNGs inlined)

Both renderers walk the same blocks, so the two files cannot drift apart: a paragraph, a table,
a figure (a PNG in the output folder), a detector finding, or a trace view (one question answered
by several models, side by side, with a marked stretch of each trace). The HTML embeds every PNG
as base64, escapes every text (a model's ``<script>`` is shown, not run) and uses no scripts or
external styles, so it opens anywhere as one file. In Markdown, traces and stories go into code
blocks, where nothing is interpreted, and the marked stretch is written ``⟦✗ … ⟧``.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from tomrl.analysis.detectors import FIRED, INCONCLUSIVE, NOT_ENOUGH_DATA, DetectorResult
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


@dataclass(frozen=True)
class TraceColumn:
    """One model's answer to the question of a :class:`TraceView`."""

    label: str  # which model
    outcome: str  # "correct", "wrong", …
    answer: str  # its extracted answer ("" when none)
    text: str  # the trace as the model wrote it
    mark: tuple[int, int] | None = None  # [start, end) of ``text`` to highlight
    notes: tuple[str, ...] = ()  # lines shown under the trace

    def __post_init__(self) -> None:
        if self.mark is not None and not 0 <= self.mark[0] < self.mark[1] <= len(self.text):
            raise ValueError(f"mark {self.mark} is not a stretch of the {len(self.text)}-character trace")


@dataclass(frozen=True)
class TraceView:
    """One question, its facts (story, question, gold, oracle …) and several models' traces side by side."""

    title: str
    facts: tuple[tuple[str, str], ...]  # (what, text); multi-line texts are shown verbatim
    columns: tuple[TraceColumn, ...]
    mark_meaning: str = "the first statement the oracle judges false"


Block = Union[Paragraph, Table, Figure, Finding, TraceView]


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    sections: list[Section]
    preamble: list[Block] = field(default_factory=list)


def verdict_label(result: DetectorResult) -> str:
    """"FIRED" (with the verdict's qualifier: "FIRED (one training seed)"), else the verdict."""
    if result.fired:
        qualifier = result.verdict[len(FIRED):] if result.verdict.startswith(FIRED) else ""
        return "FIRED" + qualifier
    if result.verdict == NOT_ENOUGH_DATA:
        return "not enough data"
    return result.verdict


def _finding_heading(result: DetectorResult) -> str:
    subject = f" — {result.subject}" if result.subject else ""
    return f"{result.title}{subject}: {verdict_label(result)}"


# ---------------------------------------------------------------------------- Markdown


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


MARK_OPEN, MARK_CLOSE = "⟦✗ ", " ⟧"


def _md_inline(text: str) -> str:
    """Plain text on one line, with HTML that a Markdown viewer would render shown as text."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def _md_code_block(text: str) -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", text, fence]


def _md_trace_view(view: TraceView) -> list[str]:
    lines = [f"#### {_md_inline(view.title)}", ""]
    for what, text in view.facts:
        if "\n" in text:
            if lines[-1]:
                lines.append("")
            lines += [f"**{_md_inline(what)}**", "", *_md_code_block(text.rstrip("\n")), ""]
        else:
            lines += [f"- **{_md_inline(what)}**: {_md_inline(text)}"]
    if lines[-1]:
        lines.append("")
    for column in view.columns:
        answer = f", answered {_md_inline(column.answer)}" if column.answer else ", no answer"
        lines += [f"**{_md_inline(column.label)}** — {_md_inline(column.outcome)}{answer}", ""]
        text = column.text
        if column.mark is not None:
            start, end = column.mark
            text = text[:start] + MARK_OPEN + text[start:end] + MARK_CLOSE + text[end:]
        lines += _md_code_block(text) + [""]
        lines += [f"- {_md_inline(note)}" for note in column.notes]
        if column.notes:
            lines.append("")
    lines += [f"*{MARK_OPEN.strip()} … {MARK_CLOSE.strip()} marks {_md_inline(view.mark_meaning)}.*", ""]
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
    if isinstance(block, TraceView):
        return _md_trace_view(block)
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
.traceview { border: 1px solid #d0d7de; padding: .5em 1em; margin: 1em 0; }
.traceview h4 { margin: .3em 0; }
.traceview table { width: 100%; table-layout: fixed; }
.verbatim { white-space: pre-wrap; font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85em; }
.traceview mark { background: #ffcccb; outline: 1px solid #cf222e; }
.traceview .correct { color: #1a7f37; font-weight: bold; }
.traceview .wrong { color: #cf222e; font-weight: bold; }
.traceview ul { margin: .3em 0; padding-left: 1.2em; font-size: .85em; }
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


def _html_trace_view(view: TraceView) -> str:
    parts = ['<div class="traceview">', f"<h4>{html.escape(view.title)}</h4>", "<table>"]
    for what, text in view.facts:
        body = f'<div class="verbatim">{html.escape(text)}</div>' if "\n" in text else html.escape(text)
        parts.append(f'<tr><th style="width: 8em">{html.escape(what)}</th><td>{body}</td></tr>')
    parts.append("</table><table><tr>")
    for column in view.columns:
        outcome = html.escape(column.outcome)
        kind = column.outcome if column.outcome in ("correct", "wrong") else ""
        answer = f": {html.escape(column.answer)}" if column.answer else ": no answer"
        parts.append(f'<th>{html.escape(column.label)}<br><span class="{kind}">{outcome}</span>{answer}</th>')
    parts.append("</tr><tr>")
    for column in view.columns:
        text = column.text
        if column.mark is None:
            trace = html.escape(text)
        else:
            start, end = column.mark
            trace = f"{html.escape(text[:start])}<mark>{html.escape(text[start:end])}</mark>{html.escape(text[end:])}"
        notes = "".join(f"<li>{html.escape(note)}</li>" for note in column.notes)
        parts.append(f'<td><div class="verbatim">{trace}</div>' + (f"<ul>{notes}</ul>" if notes else "") + "</td>")
    parts.append("</tr></table>")
    parts.append(f"<p><small><mark>marked</mark>: {html.escape(view.mark_meaning)}.</small></p></div>")
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
    if isinstance(block, TraceView):
        return _html_trace_view(block)
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

