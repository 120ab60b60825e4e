"""Rendering rules (WebGPT, Appendix A)."""

from browser.engine.backend import Document, SearchResult
from browser.engine.render import render_document, render_html, render_search_results
from browser.engine.settings import BrowserSettings

SETTINGS = BrowserSettings()
URL = "https://en.wikipedia.org/wiki/Honey"


def page_of(body: str, title: str = "Honey - Wikipedia", url: str = URL):
    html = f"<html><head><title>{title}</title></head><body><article><p>{body}</p></article></body></html>"
    return render_html(html, url, SETTINGS)


def test_title_reads_title_and_domain():
    assert page_of("Honey is sweet.").display_title == "Honey - Wikipedia (en.wikipedia.org)"


def test_links_to_other_domains_carry_the_domain_and_same_domain_links_do_not():
    page = page_of(
        'See <a href="/wiki/Bee">bees</a> and <a href="https://www.fao.org/honey">the FAO page</a>.'
    )
    assert page.lines == ("See 【0†bees】 and 【1†the FAO page†www.fao.org】.",)
    assert [link.url for link in page.links] == [
        "https://en.wikipedia.org/wiki/Bee",
        "https://www.fao.org/honey",
    ]
    assert page.plain == "See bees and the FAO page."


def test_link_ids_follow_reading_order_and_non_web_links_are_plain_text():
    page = page_of(
        '<a href="mailto:x@y.z">mail</a> <a href="#top">top</a> <a href="/a">A</a> <a href="/b">B</a>'
    )
    assert page.lines == ("mail top 【0†A】 【1†B】",)


def test_brackets_in_page_text_become_lookalikes():
    page = page_of('Odd 【text】 here and <a href="/x">a 【link】 with † in it</a>')
    assert "【" not in page.plain and "】" not in page.plain
    assert page.lines == ("Odd 〖text〗 here and 【0†a 〖link〗 with ‡ in it】",)


def test_superscript_subscript_and_images():
    page = page_of(
        'E = mc<sup>2</sup> and H<sub>2</sub>O <img alt="A bee on a flower" src="b.png"> <img src="c.png">'
    )
    assert page.lines == ("E = mc^2 and H_2O [Image: A bee on a flower] [Image]",)


def test_blocked_domains_lose_their_links_but_keep_their_text():
    page = page_of(
        'Ask <a href="https://www.reddit.com/r/bees">reddit</a> or <a href="https://quora.com/q">quora</a>.'
    )
    assert page.links == ()
    assert page.lines == ("Ask reddit or quora.",)


def test_long_paragraphs_wrap_without_splitting_links():
    link = '<a href="https://example.org/long">a link whose text is long enough to matter here</a>'
    page = page_of(("word " * 30) + link + (" word" * 30))
    assert all(len(line) <= SETTINGS.line_width for line in page.lines if "【" not in line)
    assert (
        sum(
            "【0†a link whose text is long enough to matter here†example.org】" in line for line in page.lines
        )
        == 1
    )
    assert page.plain.count("a link whose text is long enough to matter here") == 1


def test_search_results_page_lists_links_and_snippets_without_blocked_results():
    results = [
        SearchResult(
            "https://en.wikipedia.org/wiki/Honey", "Honey - Wikipedia", "Honey is a sweet substance."
        ),
        SearchResult("https://www.reddit.com/r/honey", "Honey on reddit", "r/honey"),
        SearchResult("https://www.fao.org/honey", "Honey | FAO", ""),
    ]
    page = render_search_results("how is  honey made", results, SETTINGS)
    assert page.display_title == "Search results for: how is honey made"
    assert page.lines == (
        "【0†Honey - Wikipedia†en.wikipedia.org】",
        "Honey is a sweet substance.",
        "【1†Honey | FAO†www.fao.org】",
    )
    assert render_search_results("nothing", [], SETTINGS).lines == ("No results.",)


def test_plain_text_documents_keep_their_paragraphs():
    page = render_document(
        Document("https://example.org/notes.txt", "text/plain", "First para.\n\nSecond\npara."), SETTINGS
    )
    assert page.lines == ("First para.", "Second para.")
    assert page.title == "notes.txt"


def test_unsupported_content_types_and_broken_documents_become_error_pages():
    image = render_document(Document("https://example.org/a.png", "image/png", b"\x89PNG"), SETTINGS)
    assert (image.kind, image.title) == ("error", "Error")
    assert image.lines == ("This page cannot be shown: content of type image/png.",)
    empty = render_document(Document("https://example.org/", "text/html", ""), SETTINGS)
    assert empty.kind == "error"
    broken_pdf = render_document(
        Document("https://example.org/a.pdf", "application/pdf", b"%PDF-1.4 junk"), SETTINGS
    )
    assert broken_pdf.kind == "error"


def test_pdfs_become_text():
    page = render_document(
        Document("https://example.org/paper.pdf", "application/pdf", tiny_pdf("Bees make honey")), SETTINGS
    )
    assert page.kind == "page"
    assert "Bees make honey" in page.plain


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF with one line of text, written by hand (no PDF writer needed)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)
