from django.template import Context, Template

from leaderboard.reads.charts import label
from leaderboard.reads.diffs import compute_diff, highlight_python
from leaderboard.templatetags.leaderboard_tags import http_url, pct, times


def test_it_keeps_only_http_links():
    assert http_url("https://example.com/x") == "https://example.com/x"
    assert http_url("HTTP://example.com") == "HTTP://example.com"
    for bad in (
        "javascript:alert(1)",
        " javascript:alert(1)",
        "data:text/html,x",
        "//evil.com",
        "/relative",
        "ftp://x",
        "",
        None,
    ):
        assert http_url(bad) == ""


def test_it_formats_numbers():
    assert pct(0.125) == "12.5%" and pct(None) == "–"
    assert times(1.234) == "1.23x" and times(None) == "–"


def test_it_escapes_highlighted_source():
    html = str(highlight_python('x = "</textarea><script>alert(1)</script>"\n'))
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_it_diffs_lines_both_ways():
    diff = compute_diff("a\nb\nc\n", "a\nB\nc\nd\n", "left", "right")
    assert (diff.added, diff.removed) == (2, 1)
    assert [line.kind for line in diff.unified] == ["hunk", "equal", "delete", "insert", "equal", "insert"]
    assert any(row.kind == "replace" and row.left == "b" and row.right == "B" for row in diff.side_by_side)


def test_it_marks_identical_sources():
    assert compute_diff("same\n", "same\n", "a", "b").identical


def test_it_defuses_plotly_labels():
    assert label('<a href="javascript:x">m</a>') == '&lt;a href="javascript:x"&gt;m&lt;/a&gt;'


def test_it_escapes_diff_text_in_templates():
    diff = compute_diff("<script>\n", "</textarea>\n", "a", "b")
    html = Template('{% include "leaderboard/includes/diff.html" %}').render(Context({"diff": diff, "view": "split"}))
    assert "<script>" not in html and "&lt;/textarea&gt;" in html


def test_it_writes_diff_rows_escaped_with_their_numbers_and_marks():
    diff = compute_diff("a\n<b>\n", "a\n'c' & d\n", "left", "right")
    assert '<td class="code left">&lt;b&gt;</td>' in diff.split_html
    assert '<td class="code right">&#x27;c&#x27; &amp; d</td>' in diff.split_html
    assert '<tr class="diff-delete"><td class="ln">2</td><td class="ln"></td><td class="code">-&lt;b&gt;</td></tr>' in (
        diff.unified_html
    )


def test_it_shows_a_source_too_long_to_highlight_escaped(settings):
    html = str(highlight_python("x = '<script>'\n" * 10_000))
    assert "Too long to highlight" in html and "<script>" not in html and "&lt;script&gt;" in html
