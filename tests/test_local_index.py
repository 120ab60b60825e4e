"""The local search backend: a tantivy index that searches, fetches, upserts and never half-imports."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from browser.corpus import CorpusRecord, read_freshwiki
from browser.engine.backend import PageNotFound, SearchResult
from browser.search import LocalIndex
from browser.search.local import url_variants
from browser.search.snippets import SNIPPET_CHARS, windows

FRESHWIKI = Path(__file__).resolve().parent.parent / "data" / "corpus" / "freshwiki" / "json"


def page(url: str, title: str, text: str) -> CorpusRecord:
    return CorpusRecord(url, title, text, "text/plain")


def html_page(url: str, title: str, body: str) -> CorpusRecord:
    return CorpusRecord(
        url, title, f"<html><head><title>{title}</title></head><body>{body}</body></html>", "text/html"
    )


PAGES = [
    page("https://e.org/nyc", "Cities", "New York City is the largest city in the United States."),
    page(
        "https://e.org/york",
        "Yorkshire",
        "York is a city; a new bridge opened there. City walls surround it.",
    ),
    html_page(
        "https://e.org/floods/",
        "Pakistan floods",
        '<p class="zebra">Flooding hit the Indus valley.</p><script>var giraffe = 1;</script>'
        '<p>Relief efforts <a href="https://aid.example/">https://aid.example/</a> continued.</p>',
    ),
    page("https://e.org/chess", "Candidates Tournament", "Nepomniachtchi won the tournament in Madrid."),
]


@pytest.fixture
def index(tmp_path) -> LocalIndex:
    ix = LocalIndex.open(tmp_path / "index")
    ix.add(PAGES)
    return ix


def urls(results: list[SearchResult]) -> list[str]:
    return [r.url for r in results]


def test_a_new_index_is_empty(tmp_path):
    ix = LocalIndex.open(tmp_path / "new" / "index")
    assert ix.name == "local" and ix.count() == 0 and ix.search("anything") == []
    with pytest.raises(PageNotFound):
        ix.fetch("https://e.org/nyc")


def test_words_match_title_and_visible_text_with_stemming(index):
    assert index.count() == 4
    assert urls(index.search("Nepomniachtchi")) == ["https://e.org/chess"]
    assert urls(index.search("candidates")) == ["https://e.org/chess"]  # a title word
    assert urls(index.search("flooded")) == ["https://e.org/floods/"]  # stems: flooded ~ flooding
    assert index.search("zebra") == [] and index.search("giraffe") == []  # attributes, scripts
    assert index.search("aid") == []  # a bare URL link is not prose


def test_loose_words_are_an_or_query_ranked_by_bm25(index):
    assert set(urls(index.search("Madrid Indus"))) == {"https://e.org/chess", "https://e.org/floods/"}
    assert urls(index.search("new york city"))[0] == "https://e.org/nyc"


def test_quoted_words_are_required_phrases(index):
    assert urls(index.search('"new york"')) == ["https://e.org/nyc"]
    assert urls(index.search('"York is a city"')) == ["https://e.org/york"]
    assert urls(index.search('"new york')) == ["https://e.org/nyc"]  # an unterminated quote
    assert urls(index.search('Madrid "city walls"')) == ["https://e.org/york"]  # loose words only rank
    assert index.search('"walls city"') == []


YORK = {"https://e.org/nyc", "https://e.org/york"}


@pytest.mark.parametrize(
    ("query", "found"),
    [
        # Nothing searchable: no results, no error.
        ("", set()), ("   ", set()), ('"', set()), ('""', set()), ('" "', set()), ("(", set()), ("*", set()),
        ("\\", set()), ("\x00", set()), ("[1 TO 2]", set()), ("^2", set()), ("~", set()),
        ("AND", set()), ("OR NOT -", set()), ("x" * 5000, set()), ("ß∂ƒ©˙∆˚¬…", set()), ("📚", set()),
        # Query-language syntax is plain text: a field prefix, a minus, a wildcard, a boost, a fuzzy mark or
        # a stray bracket neither fails nor changes what the words find (-york would otherwise exclude).
        ("title:York", YORK), ("York)", YORK), ("-york", YORK), ("new -york", YORK), ("york*", YORK),
        ("york^5", YORK), ("walls~2", {"https://e.org/york"}), ("+Madrid", {"https://e.org/chess"}),
        ("a:b", {"https://e.org/york"}),  # "a" is a word of the York page ("a new bridge")
        # A lone surrogate or a 500-word query still finds the pages of its words.
        ("\ud800 york", YORK), (" ".join(["york"] * 500), YORK),
    ],
)  # fmt: skip
def test_query_syntax_is_plain_text_and_only_its_words_are_searched(index, query, found):
    assert set(urls(index.search(query))) == found


@pytest.fixture(scope="module")
def freshwiki_index(tmp_path_factory) -> tuple[LocalIndex, list[CorpusRecord]]:
    records = read_freshwiki(FRESHWIKI)
    ix = LocalIndex.open(tmp_path_factory.mktemp("freshwiki") / "index")
    ix.add(records)
    return ix, records


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(), k=st.integers(min_value=-1, max_value=30))
def test_any_text_is_a_valid_query(freshwiki_index, query, k):
    index, records = freshwiki_index
    results = index.search(query, k)
    assert isinstance(results, list) and len(results) <= max(k, 0)
    assert all(isinstance(r, SearchResult) for r in results)
    # Each hit is a distinct page of the corpus, with its own title.
    titles = {record.url: record.title for record in records}
    assert len({r.url for r in results}) == len(results)
    assert all(titles.get(r.url) == r.title for r in results)


def test_an_articles_title_finds_it_first_in_freshwiki(freshwiki_index):
    ix, records = freshwiki_index
    assert ix.count() == 100
    assert all(urls(ix.search(r.title, k=1)) == [r.url] for r in records)
    [top] = ix.search('"Coromandel Express" derailed', k=1)
    assert top.url == "https://en.wikipedia.org/wiki/2023_Odisha_train_collision"
    assert top.title == "2023 Odisha train collision"


def test_snippets_are_plain_text_around_the_match(freshwiki_index):
    ix, _ = freshwiki_index
    for result in ix.search("Coromandel Express derailed"):
        assert "<" not in result.snippet and "\n" not in result.snippet
        assert 50 <= len(result.snippet) <= 220
    [top] = ix.search('"goods train"', k=1)
    assert "goods train" in top.snippet


def test_a_title_only_match_gets_the_start_of_the_body_as_snippet(tmp_path):
    ix = LocalIndex.open(tmp_path / "index")
    ix.add([page("https://e.org/a", "Zanzibar", "word " * 100)])
    [result] = ix.search("zanzibar")
    assert result.snippet == ("word " * 40).strip()


def test_a_snippet_does_not_repeat_the_results_title(tmp_path):
    ix = LocalIndex.open(tmp_path / "index")
    ix.add(
        [
            page("https://e.org/okapi", "Okapi facts", "Okapi facts\nThe okapi lives in the Congo."),
            page("https://e.org/okapis", "Okapi", "Okapis are shy. Okapi calves hide."),  # a word, no title
        ]
    )
    by_url = {result.url: result.snippet for result in ix.search("okapi")}
    assert by_url["https://e.org/okapi"].startswith("The okapi lives in the Congo")
    assert by_url["https://e.org/okapis"].startswith("Okapis are shy. Okapi calves hide")


def test_snippets_of_long_pages_come_from_around_the_match(tmp_path):
    filler = "Lorem ipsum dolor sit amet. " * 400
    ix = LocalIndex.open(tmp_path / "index")
    ix.add(
        [
            page("https://e.org/deep", "Deep", f"{filler}The Okapi lives in Congo. {filler}"),
            page("https://e.org/stem", "Stem", f"{filler}A long study of giraffes. {filler}"),  # "studies"
        ]
    )
    [deep] = ix.search("okapis")
    assert "The Okapi lives in Congo." in deep.snippet and len(deep.snippet) <= SNIPPET_CHARS
    [stem] = ix.search("studies")  # neither "studi" nor "studies" occurs: the whole body is searched
    assert "A long study of giraffes." in stem.snippet
    assert windows("ab cd EF gh", ["ef"]) == "ab cd EF gh" and windows("ab", ["x"]) is None


def test_ties_are_broken_by_url_whatever_the_insertion_order(tmp_path):
    twins = [page(f"https://e.org/{i:02d}", "Same", "identical text") for i in range(25)]
    expected = [t.url for t in twins[:10]]
    for attempt in range(3):
        shuffled = random.Random(attempt).sample(twins, len(twins))  # noqa: S311
        ix = LocalIndex.open(tmp_path / f"index{attempt}")
        for start in range(0, 25, 5):  # several commits, several segments
            ix.add(shuffled[start : start + 5])
        assert urls(ix.search("identical")) == expected
        assert urls(ix.search("identical", k=3)) == expected[:3]


def test_fetch_returns_the_stored_page(index):
    doc = index.fetch("https://e.org/floods/")
    assert (doc.url, doc.content_type, doc.title) == ("https://e.org/floods/", "text/html", "Pakistan floods")
    assert doc.content == PAGES[2].content  # the HTML as imported, for the engine to render
    assert index.fetch("https://e.org/nyc").content == PAGES[0].content


@pytest.mark.parametrize(
    ("asked", "served"),
    [
        ("https://e.org/floods", "https://e.org/floods/"),
        ("https://e.org/nyc/", "https://e.org/nyc"),
        ("https://e.org/nyc#History", "https://e.org/nyc"),
        ("https://e.org/floods#x", "https://e.org/floods/"),
    ],
)
def test_fetch_forgives_a_trailing_slash_and_a_fragment(index, asked, served):
    assert index.fetch(asked).url == served


@pytest.mark.parametrize("url", ["https://e.org/", "https://e.org/NYC", "http://e.org/nyc", "", "nyc"])
def test_fetch_of_an_unknown_url_is_page_not_found(index, url):
    with pytest.raises(PageNotFound):
        index.fetch(url)


def test_url_variants():
    assert url_variants("https://e.org/a?q=1#f") == [
        "https://e.org/a?q=1#f",
        "https://e.org/a?q=1",
        "https://e.org/a/?q=1#f",
        "https://e.org/a/?q=1",
    ]
    assert url_variants("https://e.org/") == ["https://e.org/", "https://e.org"]
    assert url_variants("https://") == ["https://"]


def test_re_adding_a_url_replaces_its_page(index):
    index.add([page("https://e.org/chess", "Chess", "Ding Liren became world champion.")])
    assert index.count() == 4
    assert index.search("Nepomniachtchi") == []
    assert urls(index.search("Liren")) == ["https://e.org/chess"]
    assert index.fetch("https://e.org/chess").title == "Chess"


def test_a_second_batch_keeps_the_first(index):
    index.add([page("https://e.org/new", "New", "Fresh words")])
    assert index.count() == 5 and urls(index.search("fresh")) == ["https://e.org/new"]
    assert urls(index.search("Nepomniachtchi")) == ["https://e.org/chess"]


def test_a_failed_import_leaves_the_index_unchanged(index):
    queries = ["city", '"new york"', "flooding", "Nepomniachtchi", "Liren"]
    before = [index.search(q) for q in queries]
    bad = CorpusRecord("https://e.org/bad", "Bad", None, "text/plain")  # type: ignore[arg-type]
    batch = [
        page("https://e.org/added", "Added", "Liren"),
        page("https://e.org/chess", "Chess", "Liren"),
        bad,
    ]
    with pytest.raises(TypeError):
        index.add(batch)
    assert index.count() == 4
    assert [index.search(q) for q in queries] == before
    assert index.fetch("https://e.org/chess").content == PAGES[3].content
    with pytest.raises(PageNotFound):
        index.fetch("https://e.org/added")
    assert index.add(batch[:2]) == 2  # the writer lock was released
    assert index.count() == 5


def test_an_index_persists_and_other_handles_see_new_commits(tmp_path, index):
    other = LocalIndex.open(index.path)
    assert other.count() == 4
    index.add([page("https://e.org/new", "New", "Fresh words")])
    assert other.count() == 5 and urls(other.search("fresh")) == ["https://e.org/new"]


def test_an_index_from_another_schema_version_is_refused(index):
    (index.path / "webgpt-local-index.json").write_text('{"schema": 0}')
    with pytest.raises(ValueError, match="rebuild the index"):
        LocalIndex.open(index.path)
