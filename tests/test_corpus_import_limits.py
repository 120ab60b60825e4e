"""Corpus imports read nothing outside their folder, whatever links it holds, and unpack no zip bomb: a
page file that is a link is refused wherever it points (also when it was swapped in after the folder was
listed), and a .zip is held to limits per file, per archive, on its compression and on its entries, both
from its table of contents at request time and on the bytes the worker really unpacks (issue 23)."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from pathlib import Path

import pytest

from browser import import_jobs
from browser.corpus import CorpusFileError, read_folder, read_freshwiki, read_jsonl, read_zim
from browser.corpus.readers import count_records
from browser.import_jobs import run_corpus_import_job, staging_dir, unpack_zip
from browser.import_requests import ImportRequestError, check_zip
from browser.models import CorpusImport, ImportStatus
from browser.services import backend_for
from tests.test_corpus_import_jobs import a_zip, nothing_was_created, post_api, post_form, upload
from tests.test_corpus_readers import article, make_zim, write_articles

pytestmark = pytest.mark.django_db

SECRET = b"django-insecure-topsecretvalue"
LINK_REFUSED = "is a symbolic link (links are not followed: nothing outside the folder is read)"
MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def media_in_tmp(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def a_site(folder: Path) -> Path:
    write(folder / "index.html", b"<title>Home</title><p>alpha bravo</p>")
    write(folder / "guides" / "b.txt", b"charlie delta")
    return folder


def a_deflated_zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


# --- links in a folder read from the server -------------------------------------------------------------


def test_a_page_file_linked_to_a_secret_outside_the_folder_is_refused_naming_it(tmp_path):
    secret = write(tmp_path / "secret_key", SECRET)
    site = a_site(tmp_path / "site")
    os.symlink(secret, site / "guides" / "key.txt")
    with pytest.raises(CorpusFileError) as exc:
        list(read_folder(site, "https://s.example/"))
    assert (exc.value.path, exc.value.reason) == (str(site / "guides" / "key.txt"), LINK_REFUSED)


def test_a_link_that_stays_inside_is_refused_too_and_a_linked_folder_is_not_entered(tmp_path):
    site = a_site(tmp_path / "site")
    os.symlink(site / "index.html", site / "home.html")  # one rule: every link is refused
    with pytest.raises(CorpusFileError, match=r"home\.html: is a symbolic link"):
        list(read_folder(site, "https://s.example/"))
    (site / "home.html").unlink()
    write(tmp_path / "elsewhere" / "secret.txt", SECRET)
    os.symlink(tmp_path / "elsewhere", site / "more")
    urls = [r.url for r in read_folder(site, "https://s.example/")]
    assert urls == ["https://s.example/guides/b.txt", "https://s.example/index.html"]


def test_a_file_or_folder_swapped_for_a_link_after_the_listing_is_refused(tmp_path):
    secret = write(tmp_path / "secret_key", SECRET)
    site = a_site(tmp_path / "site")
    records = read_folder(site, "https://s.example/")  # the folder is listed here, read below
    (site / "index.html").unlink()
    os.symlink(secret, site / "index.html")
    with pytest.raises(CorpusFileError, match=r"index\.html: is a symbolic link"):
        list(records)
    (site / "index.html").unlink()
    write(site / "index.html", b"<p>home</p>")
    records = read_folder(site, "https://s.example/")
    (site / "guides").rename(tmp_path / "moved")
    write(tmp_path / "outside" / "b.txt", SECRET)
    os.symlink(tmp_path / "outside", site / "guides")
    with pytest.raises(CorpusFileError) as exc:
        list(records)
    assert (exc.value.path, exc.value.reason) == (str(site / "guides"), LINK_REFUSED)


def test_a_freshwiki_article_linked_outside_the_folder_is_refused(tmp_path):
    outside = write_articles(tmp_path / "outside", article("Secret Article"))
    folder = write_articles(tmp_path / "fw", article("Main Article"))
    os.symlink(outside / "Secret_Article.json", folder / "Secret_Article.json")
    with pytest.raises(CorpusFileError) as exc:
        read_freshwiki(folder)
    assert (exc.value.path, exc.value.reason) == (str(folder / "Secret_Article.json"), LINK_REFUSED)


def test_a_server_folder_linking_to_the_secret_key_fails_its_job_and_the_secret_stays_unsearchable(
    alice, client_for, settings, tmp_path
):
    secret = write(tmp_path / "secret_key", SECRET)
    root = tmp_path / "imports"
    site = a_site(root / "site")
    os.symlink(secret, site / "notes.txt")
    settings.CORPUS_IMPORT_ROOT = root
    response = post_form(client_for(alice), corpus="mine", path="site", base_url="https://s.example/")
    assert response.status_code == 302
    job = run_corpus_import_job(CorpusImport.objects.get().pk)
    assert job.status == ImportStatus.FAILED
    assert job.error == f"site: notes.txt: {LINK_REFUSED}. The corpus is unchanged."
    assert backend_for("mine").search("topsecretvalue") == [] and backend_for("mine").count() == 0


@pytest.mark.parametrize("name", ["link.jsonl", "link.zim", "linked-folder"])
def test_a_server_path_that_is_itself_a_link_outside_the_import_folder_is_refused(
    alice, client_for, settings, tmp_path, name
):
    outside = tmp_path / "outside"
    write(outside / "pages.jsonl", b"{}")
    write(outside / "wiki.zim", b"ZIM")
    targets = {"link.jsonl": "pages.jsonl", "link.zim": "wiki.zim", "linked-folder": "."}
    root = tmp_path / "imports"
    root.mkdir()
    os.symlink(outside / targets[name], root / name)
    settings.CORPUS_IMPORT_ROOT = root
    refused = post_form(client_for(alice), corpus="mine", path=name, base_url="https://s.example/")
    assert refused.status_code == 400 and "inside the import folder" in refused.content.decode()
    assert nothing_was_created()


# --- one file's size, read from a folder or a ZIM -------------------------------------------------------


def test_a_page_file_or_entry_over_the_per_file_limit_is_refused_before_it_is_read(tmp_path):
    site = a_site(tmp_path / "site")
    with pytest.raises(CorpusFileError) as exc:
        list(read_folder(site, "https://s.example/", max_file_bytes=20))
    assert exc.value.path == str(site / "index.html")
    assert exc.value.reason == "is larger than 20 bytes, the most one file may hold"
    folder = write_articles(tmp_path / "fw", article("Main Article"))
    with pytest.raises(CorpusFileError, match="larger than 20 bytes"):
        read_freshwiki(folder, max_file_bytes=20)
    zim = make_zim(tmp_path / "small.zim")
    with pytest.raises(CorpusFileError, match="entry 'Home' is larger than 20 bytes"):
        list(read_zim(zim, max_file_bytes=20))


def test_a_server_folder_with_a_page_over_64_mib_fails_its_job_without_reading_it(
    alice, client_for, settings, tmp_path
):
    root = tmp_path / "imports"
    site = a_site(root / "site")
    with (site / "huge.txt").open("wb") as huge:
        huge.truncate(64 * MIB + 1)  # sparse: nothing is written, and nothing should be read
    settings.CORPUS_IMPORT_ROOT = root
    post_form(client_for(alice), corpus="mine", path="site", base_url="https://s.example/")
    job = run_corpus_import_job(CorpusImport.objects.get().pk)
    assert job.status == ImportStatus.FAILED
    reason = f"is larger than {64 * MIB} bytes, the most one file may hold"
    assert job.error == f"site: huge.txt: {reason}. The corpus is unchanged."


def test_the_per_file_limit_setting_holds_for_a_server_folder_too(alice, client_for, settings, tmp_path):
    root = tmp_path / "imports"
    site = a_site(root / "site")
    write(site / "long.txt", b"x" * 2_000)
    settings.CORPUS_IMPORT_ROOT, settings.CORPUS_IMPORT_MAX_FILE_BYTES = root, 1_000
    post_form(client_for(alice), corpus="mine", path="site", base_url="https://s.example/")
    job = run_corpus_import_job(CorpusImport.objects.get().pk)
    assert job.status == ImportStatus.FAILED and "long.txt: is larger than 1000 bytes" in job.error


def test_a_jsonl_line_over_the_per_file_limit_is_refused_with_its_number(tmp_path):
    """A JSONL line is one page: held to the same limit, read a bounded piece at a time."""
    page = '{"url": "https://s.example/%d", "title": "T", "text": "%s"}'
    source = write(tmp_path / "pages.jsonl", ("\n".join([page % (1, "a"), page % (2, "b" * 5_000)])).encode())
    with pytest.raises(CorpusFileError, match="line 2: the line is longer than 1000 bytes"):
        list(read_jsonl(source, max_line_bytes=1_000))
    assert len(list(read_jsonl(source, max_line_bytes=6_000))) == 2
    assert count_records(source, "jsonl") == 2


# --- zip bombs, refused at request time ------------------------------------------------------------------


def patched(data: bytes, local: tuple[int, bytes], central: tuple[int, bytes]) -> bytes:
    """``data``, a .zip of one member, with bytes put at an offset of its local and its central header."""
    out = bytearray(data)
    for signature, (offset, value) in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        at = out.index(signature) + offset
        out[at : at + len(value)] = value
    return bytes(out)


def encrypted_zip() -> bytes:
    encrypted = struct.pack("<H", 0x1)  # the general purpose flags: bit 0, encrypted
    return patched(a_zip({"a.html": b"scrambled"}), (6, encrypted), (8, encrypted))


ZIP_REQUESTS = [  # (settings, the .zip, what the refusal says)
    ({"CORPUS_IMPORT_MAX_FILE_BYTES": 100}, a_zip({"a.html": b"x" * 101}), "unpacks to more than 100 bytes"),
    ({}, a_deflated_zip({"a.txt": b"\0" * 2 * MIB}), "The .zip's 'a.txt' is compressed more than 100:1."),
    (
        {},
        a_deflated_zip({"a.txt": b"\0" * MIB, "b.txt": b"\0" * MIB}),  # each small, but together
        "The .zip is compressed more than 100:1.",
    ),
    (
        {"CORPUS_IMPORT_MAX_ZIP_ENTRIES": 3},
        a_zip({f"{i}.html": b"x" for i in range(4)}),
        "more than 3 entries",
    ),
    ({}, a_zip({"a.html": b"x", "./a.html": b"y"}), "two files of the same name"),
    ({}, encrypted_zip(), "holds an encrypted file ('a.html')"),
]


@pytest.mark.parametrize(("limits", "data", "message"), ZIP_REQUESTS)
def test_a_zip_over_a_limit_is_refused_by_the_form_and_the_api_and_creates_nothing(
    alice, client_for, settings, limits, data, message
):
    for name, value in limits.items():
        setattr(settings, name, value)
    fields = {"corpus": "mine", "base_url": "https://s.example/"}
    page = post_form(client_for(alice), **fields, file=upload("a.zip", data))
    assert page.status_code == 400 and message in page.content.decode().replace("&#x27;", "'")
    answer = post_api(alice, **fields, file=upload("a.zip", data))
    assert answer.status_code == 400 and message in answer.json()["file"][0]
    assert nothing_was_created()


def test_small_files_may_compress_well_and_files_the_readers_skip_are_not_limited(alice, client_for):
    pages = a_deflated_zip(
        {
            "site/a.txt": b"echo " * 100_000,  # 500 kB at about 1000:1: under the 1 MiB the ratio spares
            "site/video.bin": b"\0" * 3 * MIB,  # never unpacked, so not limited
            "site/b.html": os.urandom(2 * MIB).hex().encode(),
        }
    )
    post_form(client_for(alice), corpus="mine", file=upload("site.zip", pages), base_url="https://s.example/")
    job = run_corpus_import_job(CorpusImport.objects.get().pk)
    assert (job.status, job.record_count) == (ImportStatus.DONE, 2), job.error


def zip64_end(data: bytes) -> bytes:
    """``data``, a .zip with a ZIP64 end record, with the classic end record's counts set to 0xFFFF (as
    an archive of more than 65,535 entries has them): the count is then only in the ZIP64 record."""
    at = data.rindex(b"PK\x05\x06")
    return data[: at + 8] + struct.pack("<2H", 0xFFFF, 0xFFFF) + data[at + 12 :]


def test_the_entry_count_is_read_from_the_end_record_before_the_table_is_parsed(settings, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)  # write a ZIP64 end record for 4 entries
        data = zip64_end(a_zip({f"{i}.html": b"x" for i in range(4)}))
    assert check_zip(io.BytesIO(data)) == "folder"  # zipfile reads it as it is
    settings.CORPUS_IMPORT_MAX_ZIP_ENTRIES = 3

    def parse_everything(self):
        raise AssertionError("the whole table of contents was parsed")

    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", parse_everything)
    with pytest.raises(ImportRequestError, match="more than 3 entries"):
        check_zip(io.BytesIO(data))


# --- zip bombs, stopped while the worker unpacks ----------------------------------------------------------


def test_the_worker_counts_the_bytes_it_unpacks_rather_than_trusting_the_table(
    alice, client_for, settings, monkeypatch
):
    big = os.urandom(3 * MIB // 2).hex().encode()  # 3 MiB that compress about 2:1
    pages = a_deflated_zip({"site/a.html": b"<p>foxtrot</p>", "site/big.txt": big})
    post_form(client_for(alice), corpus="mine", file=upload("site.zip", pages), base_url="https://s.example/")
    job = CorpusImport.objects.get()
    settings.CORPUS_IMPORT_MAX_FILE_BYTES = 2 * MIB
    monkeypatch.setattr(import_jobs, "check_zip", lambda *args: "folder")  # as if the table lied
    job = run_corpus_import_job(job.pk)
    assert job.status == ImportStatus.FAILED
    assert job.error == f"The .zip's 'site/big.txt' unpacks to more than {2 * MIB} bytes (per file)."
    assert list(staging_dir().iterdir()) == []  # the upload and the half-unpacked folder are gone


def test_a_zip_that_understates_a_members_size_is_refused_while_unpacking(alice, client_for):
    ten = struct.pack("<L", 10)  # the unpacked size, in both headers
    data = patched(a_deflated_zip({"big.txt": b"hotel " * MIB}), (22, ten), (24, ten))
    post_form(client_for(alice), corpus="mine", file=upload("site.zip", data), base_url="https://s.example/")
    job = run_corpus_import_job(CorpusImport.objects.get().pk)
    assert job.status == ImportStatus.FAILED
    assert job.error.startswith("Cannot unpack 'big.txt' from the .zip (Bad CRC-32")


def test_unpacking_writes_only_pages_and_articles_and_refuses_clashing_names(settings, tmp_path):
    stored = tmp_path / "site.zip"
    stored.write_bytes(a_zip({"site/a.html": b"x", "site/logo.png": b"png", "site/a.json": b"{}"}))
    root = unpack_zip(stored, tmp_path / "out")
    assert root == tmp_path / "out" / "site"
    assert sorted(p.name for p in root.iterdir()) == ["a.html", "a.json"]
    stored.write_bytes(a_zip({"a.html": b"x", "a.html/b.html": b"y"}))
    with pytest.raises(ImportRequestError, match=r"'a\.html/b\.html' clashes with"):
        unpack_zip(stored, tmp_path / "again")
