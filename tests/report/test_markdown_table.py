"""The one markdown table writer: cells from programs and people cannot break a table."""

from hypothesis import given, strategies as st

from pinset.markdown_table import cell, table
from pinset.nightly.markdown import pick_markdown
from pinset.nightly.model import VERIFY_FAILED, BuildPick, PickResult, Reason
from pinset.verify.markdown import verify_markdown
from tests.testing import FIXTURES


def test_pipes_and_newlines_are_escaped_in_cells_and_headers():
    assert table(["a|b", "c"], [["x | y", "two\nlines"], [3, "ok"]]) == [
        "| a\\|b | c |", "|---|---|", "| x \\| y | two lines |", "| 3 | ok |"]


def _columns(line: str) -> int:
    """Columns of a table line as GitHub counts them: unescaped pipes, minus the outer two."""
    return line.replace("\\|", "").count("|") - 1


@given(st.lists(st.lists(st.text(), min_size=3, max_size=3), max_size=5))
def test_any_cell_text_keeps_one_line_per_row_and_the_column_count(rows):
    lines = table(["a", "b", "c"], rows)
    assert len(lines) == 2 + len(rows)
    assert all(_columns(line) == 3 for line in lines)


def test_cell_is_single_line():
    assert cell("a\r\nb\rc|d") == "a b c\\|d"


def test_pick_reasons_with_a_pipe_stay_in_their_column():
    result = PickResult("d", None, [BuildPick("b1", "0123456789abcdef", VERIFY_FAILED,
                                              [Reason(None, "verify", detail="MUL_MAT | 1/4 failed\nsee log")])])
    row = pick_markdown(result).splitlines()[-1]
    assert row == "| b1 | `0123456789ab` | verify failed | verify failed: MUL_MAT \\| 1/4 failed see log |"


def test_verify_gate_detail_with_a_pipe_and_newline_stays_in_its_row():
    import json

    doc = json.loads((FIXTURES / "report/blocked/verify-h200.json").read_text())
    doc.setdefault("summary", "1 of 2 builds red")
    gate = doc["builds"][0]["gates"][1]
    gate.update(status="failed", seconds=3.0, detail="last output: a | b\nc")
    text = verify_markdown(doc)
    assert f"| {gate['name']} | failed | 3 s | last output: a \\| b c |" in text.splitlines()
