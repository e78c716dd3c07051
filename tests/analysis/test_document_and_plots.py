"""The report's two renderings carry the same content; plots are real PNGs."""

from __future__ import annotations

import base64
import re

import pytest

from tomrl.analysis.detectors import detect_inverted_difficulty
from tomrl.analysis.document import Document, Figure, Finding, Paragraph, Section, Table, render_html, render_markdown, write_document
from tomrl.analysis.plots import Curve, Panel, accuracy_curve, plot_accuracy_by_order, plot_generalization_matrix, plot_panels
from tomrl.analysis.significance import from_counts

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def document(tmp_path):
    plot_panels(tmp_path / "curve.png", [Panel("Length", "tokens", [Curve("mean", [0, 1, 2], [3.0, 2.0, None])])])
    finding = detect_inverted_difficulty({0: from_counts(10, 100), 1: from_counts(90, 100)}, subject="model | x")
    return Document("Test <report>", [
        Section("One", [Paragraph("Plain text with a | pipe & <tag>."),
                        Table(["a", "b|c"], [["1", "x|y"]], caption="cap"),
                        Figure("curve.png", "The curve.")]),
        Section("Two", [Finding(finding)]),
    ])


def test_markdown_and_html_hold_the_same_content(document, tmp_path):
    markdown = render_markdown(document)
    page = render_html(document, tmp_path)
    assert markdown.startswith("# Test <report>")
    assert "| 1 | x\\|y |" in markdown  # pipes escaped in tables
    assert "![The curve.](curve.png)" in markdown
    assert "<table>" in page and "&lt;tag&gt;" in page and "<script" not in page
    for text in ("Plain text with a", "The curve.", "Inverted difficulty — model", "FIRED", "order 1", "Two"):
        assert text in markdown and text in page


def test_html_embeds_the_png(document, tmp_path):
    page = render_html(document, tmp_path)
    data = re.search(r'src="data:image/png;base64,([^"]+)"', page).group(1)
    assert base64.b64decode(data) == (tmp_path / "curve.png").read_bytes()
    assert 'src="curve.png"' not in page  # nothing refers outside the file


def test_write_document_writes_both_files(document, tmp_path):
    markdown, page = write_document(document, tmp_path)
    assert markdown.read_text().startswith("# Test")
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_table_rows_must_match_columns():
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        Table(["a", "b", "c"], [["1", "2"]])


def test_plots_write_pngs_and_reject_empty_input(tmp_path):
    acc = [from_counts(3, 10), from_counts(0, 0), from_counts(8, 10)]
    path = plot_panels(tmp_path / "a.png", [Panel("Acc", "accuracy", [accuracy_curve("id", [0, 5, 10], acc)], percent=True)])
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    perfect = from_counts(10, 10)  # its Wilson upper bound is 0.9999…, a hair below the estimate
    bars = plot_accuracy_by_order(tmp_path / "b.png", {"base": {0: acc[0], 1: acc[2]}, "rl": {0: acc[2], 1: perfect}})
    assert bars.read_bytes().startswith(PNG_SIGNATURE)
    cells = {("base", "tomi"): acc[0], ("rl", "tomi"): acc[2], ("rl", "hitom"): acc[2]}
    heat = plot_generalization_matrix(tmp_path / "c.png", ["base", "rl"], ["tomi", "hitom"], cells, {("rl", "hitom")})
    assert heat.read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(ValueError):
        plot_panels(tmp_path / "d.png", [])
    with pytest.raises(ValueError):
        plot_accuracy_by_order(tmp_path / "e.png", {})
    assert not (tmp_path / "d.png").exists() and not list(tmp_path.glob(".*.tmp"))


def test_same_data_gives_the_same_png(tmp_path):
    panel = [Panel("x", "y", [Curve("c", [0, 1, 2], [1.0, 2.0, 3.0])])]
    first = plot_panels(tmp_path / "1.png", panel).read_bytes()
    assert plot_panels(tmp_path / "2.png", panel).read_bytes() == first
