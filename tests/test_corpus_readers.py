"""Corpus readers read and validate a whole source, or reject it naming the file and the line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html

from browser.corpus import (
    CorpusFileError,
    CorpusRecord,
    detect_format,
    read_corpus,
    read_folder,
    read_freshwiki,
    read_jsonl,
    read_zim,
)
from browser.corpus.html_text import html_title, html_to_text

ROOT = Path(__file__).resolve().parent.parent
FRESHWIKI = ROOT / "data" / "corpus" / "freshwiki" / "json"


def write_jsonl(path: Path, *rows: object) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


# --- JSONL ---------------------------------------------------------------------------------------------


def test_jsonl_reads_text_and_html_rows_and_skips_blank_lines(tmp_path):
    path = write_jsonl(
        tmp_path / "pages.jsonl",
        {"url": "https://example.org/a", "title": "A  page", "text": "Alpha text"},
        "",
        {"url": "http://example.org/b", "title": "B", "html": "<p>Beta</p>"},
    )
    assert list(read_jsonl(path)) == [
        CorpusRecord("https://example.org/a", "A page", "Alpha text", "text/plain"),
        CorpusRecord("http://example.org/b", "B", "<p>Beta</p>", "text/html"),
    ]


def test_jsonl_does_not_split_lines_on_unicode_line_separators(tmp_path):
    row = '{"url": "https://example.org/a", "title": "T", "text": "one\u2028two\u0085three"}'
    path = tmp_path / "pages.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + row.encode() + b"\r\n")
    [record] = read_jsonl(path)  # unpacking consumes the iterator
    assert record.content == "one\u2028two\u0085three"


GOOD = {"url": "https://example.org/a", "title": "T", "text": "x"}


@pytest.mark.parametrize(
    ("bad_row", "reason"),
    [
        ('{"url": ', "invalid JSON (Expecting value at column 9)"),
        ("[1, 2]", "expected a JSON object, not list"),
        ({"title": "T", "text": "x"}, "missing 'url'"),
        ({"url": "https://e.org/", "text": "x"}, "missing 'title'"),
        ({"url": "https://e.org/", "title": "T"}, "missing 'text' or 'html'"),
        ({**GOOD, "html": "<p>x</p>"}, "has both 'text' and 'html' (give one)"),
        ({**GOOD, "url": "ftp://e.org/x"}, "'url' must be an absolute http(s) URL: 'ftp://e.org/x'"),
        ({**GOOD, "url": "/relative"}, "'url' must be an absolute http(s) URL: '/relative'"),
        ({**GOOD, "title": "  "}, "'title' is empty"),
        ({**GOOD, "title": 3}, "'title' must be a string, not int"),
        ({**GOOD, "text": " "}, "'text' is empty"),
        ({**GOOD, "body": "x"}, "unknown key 'body' (expected url, title and one of text or html)"),
        (
            '{"url": "https://e.org/", "title": "T", "text": "\\ud800"}',
            "'text' contains an invalid character",
        ),
        (GOOD, "url https://example.org/a already appears on line 1"),
    ],
)
def test_jsonl_rejects_a_bad_row_naming_file_and_line(tmp_path, bad_row, reason):
    path = write_jsonl(tmp_path / "pages.jsonl", GOOD, "", bad_row)
    with pytest.raises(CorpusFileError) as exc:
        list(read_jsonl(path))
    assert (exc.value.path, exc.value.line) == (str(path), 3)
    assert exc.value.reason.startswith(reason)
    assert str(exc.value).startswith(f"{path}: line 3: {reason}")


def test_jsonl_rejects_invalid_utf8_with_its_line(tmp_path):
    path = tmp_path / "pages.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b'\n{"url": "\xff"}\n')
    with pytest.raises(CorpusFileError, match=r"line 2: not valid UTF-8"):
        list(read_jsonl(path))


def test_jsonl_rejects_an_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with pytest.raises(CorpusFileError, match="no records") as exc:
        list(read_jsonl(path))
    assert exc.value.line == 0 and str(exc.value) == f"{path}: no records in this file"


# --- folder --------------------------------------------------------------------------------------------


def make_site(root: Path) -> Path:
    (root / "guides" / "deep").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "index.html").write_text("<html><head><title> Home\n page </title></head><body>Hi</body></html>")
    (root / "guides" / "getting_started.txt").write_text("Plain words")
    (root / "guides" / "deep" / "no title.htm").write_text("<p>No title here</p>")
    (root / "guides" / "style.css").write_text("p {}")
    (root / ".git" / "notes.txt").write_text("hidden")
    return root


def test_folder_reads_pages_sorted_with_urls_and_titles(tmp_path):
    records = read_folder(make_site(tmp_path / "site"), "https://docs.example.org/base")
    assert [(r.url, r.title, r.content_type) for r in records] == [
        ("https://docs.example.org/base/guides/deep/no%20title.htm", "no title", "text/html"),
        ("https://docs.example.org/base/guides/getting_started.txt", "getting started", "text/plain"),
        ("https://docs.example.org/base/index.html", "Home page", "text/html"),
    ]


def test_folder_errors_name_the_file(tmp_path):
    site = make_site(tmp_path / "site")
    (site / "guides" / "broken.txt").write_bytes(b"line one\nline \xff two\n")
    with pytest.raises(CorpusFileError) as exc:
        list(read_folder(site, "https://docs.example.org/"))
    assert (exc.value.path, exc.value.line) == (str(site / "guides" / "broken.txt"), 2)
    (site / "guides" / "broken.txt").write_text("  \n")
    with pytest.raises(CorpusFileError, match=r"broken\.txt: file is empty"):
        list(read_folder(site, "https://docs.example.org/"))
    with pytest.raises(CorpusFileError, match="base URL must be an absolute http"):
        read_folder(site, "docs.example.org")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusFileError, match=r"no \.html, \.htm or \.txt files"):
        read_folder(tmp_path / "empty", "https://docs.example.org/")


# --- FreshWiki -----------------------------------------------------------------------------------------


def article(title: str, **extra: object) -> dict:
    return {
        "title": title.replace(" ", "_"),
        "url": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}",
        "summary": "First <lead> paragraph.\nSecond paragraph mentions Other Article twice: Other Article.",
        "content": [
            {
                "section_title": "History & background",
                "section_content": [
                    {"sentence": "It began in 2020", "refs": ["https://news.example/a?x=1&y=2"]},
                    {"sentence": "Then it grew!", "refs": []},
                    {
                        "sentence": "Cited twice",
                        "refs": ["https://news.example/b", "[ERROR retrieving ref link]"],
                    },
                ],
                "subsections": [
                    {
                        "section_title": "Later",
                        "section_content": [
                            {"sentence": "Again", "refs": ["https://news.example/a?x=1&y=2"]}
                        ],
                        "subsections": [],
                    }
                ],
            },
            {"section_title": "See also", "section_content": [], "subsections": []},
        ],
        "references": {
            "2": "https://news.example/b",
            "1": "https://news.example/a?x=1&y=2",
            "3": "ISBN: 978-0-19-963851-2",
            "4": "[ERROR retrieving ref link]",
        },
        **extra,
    }


def write_articles(folder: Path, *articles: dict) -> Path:
    folder.mkdir(exist_ok=True)
    for a in articles:
        (folder / f"{a['title']}.json").write_text(json.dumps(a, indent=1))
    return folder


def test_freshwiki_renders_an_article_as_a_wikipedia_like_page(tmp_path):
    folder = write_articles(tmp_path / "fw", article("Main Article"), article("Other Article"))
    main, _ = read_freshwiki(folder)
    assert (main.url, main.title, main.content_type) == (
        "https://en.wikipedia.org/wiki/Main_Article",
        "Main Article",
        "text/html",
    )
    page = main.content
    assert "<title>Main Article</title>" in page and "<h1>Main Article</h1>" in page
    assert "<p>First &lt;lead&gt; paragraph.</p>" in page
    assert "<h2>History &amp; background</h2>" in page and "<h3>Later</h3>" in page
    assert "It began in 2020.<sup>[1]</sup> Then it grew! Cited twice.<sup>[2]</sup>" in page
    assert "Again.<sup>[1]</sup>" in page
    assert "See also" not in page  # an empty section is left out
    refs = page[page.index("<h2>References</h2>") :]
    assert (
        '<li>[1] <a href="https://news.example/a?x=1&amp;y=2">https://news.example/a?x=1&amp;y=2</a></li>'
        in refs
    )
    assert "<li>[3] ISBN: 978-0-19-963851-2</li>" in refs
    assert "ERROR" not in page
    # The first mention of another corpus article links to it; later mentions and the page itself do not.
    assert page.count('<a href="https://en.wikipedia.org/wiki/Other_Article">Other Article</a>') == 1
    assert 'Main_Article">' not in page
    links = [a.get("href") for a in lxml_html.fromstring(page).iter("a")]
    assert links == [
        "https://en.wikipedia.org/wiki/Other_Article",
        "https://news.example/a?x=1&y=2",
        "https://news.example/b",
    ]


def test_freshwiki_rejects_bad_files_naming_them(tmp_path):
    folder = write_articles(tmp_path / "fw", article("Good"))
    broken = article("Broken")
    del broken["content"][0]["subsections"][0]["section_content"][0]["refs"]
    write_articles(folder, broken)
    with pytest.raises(CorpusFileError) as exc:
        read_freshwiki(folder)
    assert exc.value.path == str(folder / "Broken.json")
    assert exc.value.reason == "content[0].subsections[0].section_content[0]: missing 'refs'"
    (folder / "Broken.json").write_text('{\n "title": "x",\n oops\n}')
    with pytest.raises(CorpusFileError, match=r"Broken.json: line 3: invalid JSON"):
        read_freshwiki(folder)
    write_articles(folder, {**article("Broken"), "url": article("Good")["url"]})
    with pytest.raises(CorpusFileError) as exc:
        read_freshwiki(folder)
    assert exc.value.path == str(folder / "Good.json")  # files are read in name order
    assert exc.value.reason == "url https://en.wikipedia.org/wiki/Good already appears in Broken.json"


def test_freshwiki_reads_the_real_dataset():
    records = read_freshwiki(FRESHWIKI)
    assert len(records) == 100 == len({r.url for r in records})
    by_title = {r.title: r for r in records}
    odisha = by_title["2023 Odisha train collision"]
    text = html_to_text(odisha.content)
    assert text.startswith("2023 Odisha train collision\nOn 2 June 2023, three trains collided")
    assert html_title(odisha.content) == odisha.title
    assert "[1]" in text and "References" in text
    assert '<a href="https://en.wikipedia.org/wiki/Vande_Bharat_Express">' in odisha.content
    links = sum(r.content.count('<a href="http') for r in records)
    assert links > 4000  # reference lists (a few articles come without any usable source)


# --- ZIM -----------------------------------------------------------------------------------------------


def make_zim(path: Path) -> Path:
    writer = pytest.importorskip("libzim.writer")

    class Page(writer.Item):
        def __init__(self, path: str, title: str, mimetype: str, content: str) -> None:
            super().__init__()
            self.path, self.title, self.mimetype, self.content = path, title, mimetype, content

        def get_path(self) -> str:
            return self.path

        def get_title(self) -> str:
            return self.title

        def get_mimetype(self) -> str:
            return self.mimetype

        def get_contentprovider(self) -> writer.StringProvider:
            return writer.StringProvider(self.content)

        def get_hints(self) -> dict:
            return {writer.Hint.FRONT_ARTICLE: self.mimetype.startswith("text/html")}

    with writer.Creator(str(path)).config_indexing(False, "eng") as creator:
        creator.set_mainpath("Home")
        creator.add_item(Page("Home", "Home page", "text/html", "<html><body><p>Welcome</p></body></html>"))
        creator.add_item(Page("notes/plain text", "", "text/plain", "Just notes"))
        creator.add_item(Page("style.css", "", "text/css", "p {}"))
        creator.add_redirection("Start", "Start", "Home", {writer.Hint.FRONT_ARTICLE: True})
        creator.add_metadata("Name", "test_wiki en")
        creator.add_metadata("Title", "Test wiki")
    return path


def test_zim_reads_articles_but_not_redirects_or_assets(tmp_path):
    path = make_zim(tmp_path / "small.zim")
    records = sorted(read_zim(path), key=lambda r: r.url)
    assert [(r.url, r.title, r.content_type) for r in records] == [
        ("https://test-wiki-en/Home", "Home page", "text/html"),
        ("https://test-wiki-en/notes/plain%20text", "notes/plain text", "text/plain"),
    ]
    assert records[0].content == "<html><body><p>Welcome</p></body></html>"
    assert {r.url for r in read_zim(path, "https://wiki.example.org")} == {
        "https://wiki.example.org/Home",
        "https://wiki.example.org/notes/plain%20text",
    }


def test_zim_errors(tmp_path, monkeypatch):
    with pytest.raises(CorpusFileError, match="no such file"):
        read_zim(tmp_path / "missing.zim")
    (tmp_path / "fake.zim").write_text("not a zim")
    with pytest.raises(CorpusFileError, match="not a readable ZIM file"):
        read_zim(tmp_path / "fake.zim")
    monkeypatch.setitem(sys.modules, "libzim.reader", None)  # as if libzim were not installed
    with pytest.raises(CorpusFileError) as exc:
        read_zim(tmp_path / "fake.zim")
    assert exc.value.reason == "ZIM support needs the libzim package: pip install libzim"


# --- format detection and shared helpers ---------------------------------------------------------------


def test_read_corpus_detects_the_format(tmp_path):
    jsonl = write_jsonl(tmp_path / "pages.jsonl", GOOD)
    site = make_site(tmp_path / "site")
    fw = write_articles(tmp_path / "fw", article("Main Article"))
    assert [detect_format(p) for p in (jsonl, site, fw)] == ["jsonl", "folder", "freshwiki"]
    assert list(read_corpus(jsonl)) == list(read_jsonl(jsonl))
    assert list(read_corpus(fw)) == read_freshwiki(fw)
    pages = list(read_folder(site, "https://s.example/"))
    assert list(read_corpus(site, base_url="https://s.example/")) == pages
    assert list(read_corpus(site, "folder", "https://s.example/")) == pages
    with pytest.raises(CorpusFileError, match="a folder corpus needs a base URL"):
        read_corpus(site)
    with pytest.raises(CorpusFileError, match="unknown format 'csv'"):
        read_corpus(jsonl, "csv")
    with pytest.raises(CorpusFileError, match="no such file or folder"):
        read_corpus(tmp_path / "nothing")
    with pytest.raises(CorpusFileError, match="cannot tell the format"):
        read_corpus(tmp_path / "site" / "index.html")


def test_zim_format_is_detected(tmp_path):
    path = make_zim(tmp_path / "small.zim")
    assert detect_format(path) == "zim" and len(list(read_corpus(path))) == 2


def test_visible_text_drops_markup_scripts_and_optionally_bare_links():
    page = (
        '<html><head><title>T</title><style>p {color: red}</style></head><body><p class="secret">One'
        "<b>Two</b></p><!-- note -->Three<script>alert(1)</script> Four<br>Five<ul><li>Six</li></ul>"
        '<a href="https://x.example/">https://x.example/</a><a href="https://y.example/">Why</a></body></html>'
    )
    assert html_to_text(page) == "OneTwo\nThree Four\nFive\nSix\nhttps://x.example/Why"
    assert html_to_text(page, drop_bare_links=True) == "OneTwo\nThree Four\nFive\nSix\nWhy"
    assert html_to_text("") == "" and html_title("<p>x</p>") == ""
    assert html_to_text('<?xml version="1.0" encoding="utf-8"?><p>x</p>') == "x"


def test_records_reject_unknown_content_types():
    with pytest.raises(ValueError, match="content_type"):
        CorpusRecord("https://e.org/", "T", "x", "application/pdf")
