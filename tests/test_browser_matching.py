"""Find and Quote's whitespace-free, case-folded index of a page (browser/engine/matching.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from browser.engine import matching


def reference_compact(text: str) -> tuple[str, list[int]]:
    """The index by its definition: each non-space character's case folding, with its offset."""
    pairs = [(one, at) for at, char in enumerate(text) if not char.isspace() for one in char.casefold()]
    return "".join(one for one, _ in pairs), [offset for _, offset in pairs]


def test_the_whitespace_table_is_str_isspace_over_every_code_point():
    spaces = {code for code in range(0x110000) if chr(code).isspace()}
    assert spaces == set(matching.SPACES.tolist())


# Letters that fold to two (ß, ﬁ), ones whose case differs in length (İ), and spaces beyond ASCII.
LETTERS = "abAB zß\t\nİ\u03c3\u03a3ﬁ.,\u00a0\u2003\u1680\x1c\x85\u3000"
PAGE = st.text(alphabet=st.sampled_from(list(LETTERS)), max_size=40)


@given(PAGE)
def test_the_index_is_the_definition_whether_or_not_folding_changes_lengths(text):
    compact, offsets = matching._compact.__wrapped__(text)
    assert (compact, offsets.tolist()) == reference_compact(text)


def test_a_quote_spans_the_page_s_own_spelling_across_spaces_and_folded_letters():
    text = "Die  STRASSE\u00a0war\nlang. Die Straße war kurz."
    start, end = matching.quote_span(text, "straße war kurz")
    assert text[start:end] == "Straße war kurz"
    start, end = matching.quote_span(text, "strasse war lang")
    assert (text[start:end], type(start), type(end)) == ("STRASSE\u00a0war\nlang", int, int)
    start, end = matching.quote_span(text, "die━kurz")
    assert text[start:end] == text[:-1]
    assert matching.quote_span(text, "war breit") is None
    assert matching.find(text, "lang", 20) == matching.find(text, "lang") == 17
