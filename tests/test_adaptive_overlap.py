"""Adaptive overlap (issue 26): an item whose judgements disagree asks for one more, up to the batch's
maximum; the extra labeler never judged it before; results, the batch page and exports show the final
overlap; exports leave out screening tests and work excluded on a revocation."""

from __future__ import annotations

import io
import json
import math
import uuid
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from annotation.exports import service as exports
from annotation.feedback import assignment as work
from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchError, BatchSettings, check_batch_settings, create_feedback_batch
from annotation.feedback.results import batch_results
from annotation.models import Assignment, FeedbackBatch, FeedbackItem, Qualification
from annotation.questions.service import import_questions
from annotation.workforce.overlap import kendall_tau_b, preferences_disagree, rankings_disagree
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

LOWER, HIGHER, TIE = "lower", "higher", "tie"


# The measures, against hand-computed values -----------------------------------------------------------------


def test_kendall_tau_b_against_hand_computed_values():
    best_first = {"a": 1, "b": 2, "c": 3, "d": 4}
    assert kendall_tau_b(best_first, best_first) == 1.0
    assert kendall_tau_b(best_first, {"a": 4, "b": 3, "c": 2, "d": 1}) == -1.0
    # Two of six pairs swapped (a-b, c-d): C = 4, D = 2, no ties: (4 - 2) / 6.
    assert kendall_tau_b(best_first, {"a": 2, "b": 1, "c": 4, "d": 3}) == pytest.approx(1 / 3)
    # a and b tied in the second: C = 5, D = 0, T2 = 1: 5 / sqrt(6 * 5).
    assert kendall_tau_b(best_first, {"a": 1, "b": 1, "c": 2, "d": 3}) == pytest.approx(5 / math.sqrt(30))
    # Only the answers both ranked count: b and d left out, a-c is concordant.
    assert kendall_tau_b(best_first, {"a": 1, "c": 2}) == 1.0
    assert kendall_tau_b(best_first, {"a": 1, "b": 1, "c": 1, "d": 1}) is None  # orders nothing
    assert kendall_tau_b(best_first, {"a": 1}) is None


def test_opposite_preferences_disagree_and_a_tie_never_does():
    assert preferences_disagree([0.5, -1.0])
    assert preferences_disagree([1.0, 0.0, -0.5])  # one each way, a tie taking no side
    assert not preferences_disagree([1.0, -0.5, 0.5])  # 2 against 1: a majority settles it
    assert not preferences_disagree([0.5, 1.0, 0.0])  # a tie is not opposite
    assert not preferences_disagree([0.0, 0.0])
    assert not preferences_disagree([-1.0])
    swapped = [{"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 2, "b": 1, "c": 4, "d": 3}]  # tau 1/3
    assert not rankings_disagree(swapped, 0.0)
    assert rankings_disagree(swapped, 0.5)
    assert not rankings_disagree(swapped, 1 / 3)  # under, not at
    reversed_ = {"a": 4, "b": 3, "c": 2, "d": 1}
    assert rankings_disagree([*swapped, reversed_], 0.0)  # taus 1/3, -1, -1/3: mean -1/3


# The flow ---------------------------------------------------------------------------------------------------


def make_batch(template: str, overlap: int = 2, max_overlap: int | None = 3, **settings) -> FeedbackBatch:
    """One item of the template on one question (two answers, four for a ranking, one for a rating)."""
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    count = {"ranking": 4, "rating": 1}.get(template, 2)
    rows = [{"question": "why is the sky blue", "answer": f"answer {i}"} for i in range(count)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    preset = "truthfulqa" if template == "rating" else ""
    config = BatchSettings(
        "overlap",
        template,
        preset,
        overlap=overlap,
        max_overlap=max_overlap,
        required_probability=0.0,
        **settings,
    )
    return create_feedback_batch(None, config, [answers])


def compare(person, prefers: str) -> Assignment:
    """The person's next task, judged: the lower-id answer better, the higher-id one, or a tie."""
    task = work.next_assignment(person)
    assert task is not None, person
    lower_shown_first = task.order[0] == min(task.order)
    code = (
        "equal" if prefers == TIE else ("a" if (prefers == LOWER) == lower_shown_first else "b") + "_better"
    )
    result = work.submit(task.pk, person, {"ratings": {"overall": code}}, uuid.uuid4())
    assert result.validation.complete, result.validation.errors
    return result.assignment


def rank(person, best_first: list[int], task: Assignment | None = None) -> Assignment:
    """The person's next task ranked in the order of ``best_first`` (positions into the answers by id)."""
    task = task or work.next_assignment(person)
    by_id = sorted(task.order)
    rank_of = {by_id[position]: place for place, position in enumerate(best_first, start=1)}
    ranks = {str(slot): rank_of[answer] for slot, answer in enumerate(task.order, start=1)}
    result = work.submit(task.pk, person, {"ranks": ranks}, uuid.uuid4())
    assert result.validation.complete, result.validation.errors
    return result.assignment


def labelers(django_user_model, *names: str):
    return [make_user(django_user_model, name, "labeler") for name in names]


def item_of(batch: FeedbackBatch) -> FeedbackItem:
    return FeedbackItem.objects.select_related("batch").get(batch=batch)


def test_opposite_preferences_ask_for_one_more_labeler_who_never_had_the_item(django_user_model):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=3)
    bob, carol, dave, erin = labelers(django_user_model, "bob", "carol", "dave", "erin")
    compare(bob, LOWER)
    assert (item_of(batch).extra_overlap, item_of(batch).is_open) == (0, True)  # one judgement: no target yet
    compare(carol, HIGHER)
    item = item_of(batch)
    assert (item.extra_overlap, item.target_overlap, item.is_open) == (1, 3, True)
    # The ones who judged it never get it again: the extra judgement is someone else's.
    assert work.next_assignment(bob) is None and work.next_assignment(carol) is None
    compare(dave, LOWER)
    item = item_of(batch)
    assert (item.extra_overlap, item.target_overlap, item.is_open) == (1, 3, False)  # at the maximum
    assert work.next_assignment(erin) is None
    assert set(Assignment.objects.values_list("labeler__username", flat=True)) == {"bob", "carol", "dave"}


def test_an_item_that_still_disagrees_asks_again_up_to_the_maximum(django_user_model):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=4)
    bob, carol, dave, erin, fay = labelers(django_user_model, "bob", "carol", "dave", "erin", "fay")
    compare(bob, LOWER)
    compare(carol, HIGHER)
    compare(dave, TIE)  # takes no side: still one each way
    assert item_of(batch).target_overlap == 4
    compare(erin, HIGHER)  # 2 against 1: settled, and at the maximum anyway
    item = item_of(batch)
    assert (item.target_overlap, item.is_open) == (4, False)
    assert work.next_assignment(fay) is None


@pytest.mark.parametrize(("first", "second"), [(LOWER, LOWER), (LOWER, TIE), (TIE, HIGHER), (TIE, TIE)])
def test_agreeing_or_tied_judgements_ask_for_nothing(django_user_model, first, second):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=3)
    bob, carol, dave = labelers(django_user_model, "bob", "carol", "dave")
    compare(bob, first)
    compare(carol, second)
    assert (item_of(batch).extra_overlap, item_of(batch).is_open) == (0, False)
    assert work.next_assignment(dave) is None


def test_without_a_maximum_overlap_a_disagreement_asks_for_nothing(django_user_model):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=None)
    bob, carol = labelers(django_user_model, "bob", "carol")
    compare(bob, LOWER)
    compare(carol, HIGHER)
    assert item_of(batch).extra_overlap == 0


def test_a_maximum_equal_to_the_overlap_asks_for_nothing(django_user_model):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=2)
    bob, carol = labelers(django_user_model, "bob", "carol")
    compare(bob, LOWER)
    compare(carol, HIGHER)
    assert item_of(batch).extra_overlap == 0


def test_a_revision_that_resolves_the_disagreement_keeps_the_target_and_one_that_makes_one_asks(
    django_user_model,
):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=3)
    bob, carol = labelers(django_user_model, "bob", "carol")
    mine = compare(bob, LOWER)
    theirs = compare(carol, LOWER)
    assert item_of(batch).extra_overlap == 0
    # carol revises to the opposite answer: now they disagree.
    lower_first = theirs.order[0] == min(theirs.order)
    work.submit(
        theirs.pk, carol, {"ratings": {"overall": "b_better" if lower_first else "a_better"}}, uuid.uuid4()
    )
    assert item_of(batch).extra_overlap == 1
    # bob comes round to carol's view: the extra judgement asked for stays asked for.
    lower_first = mine.order[0] == min(mine.order)
    work.submit(
        mine.pk, bob, {"ratings": {"overall": "b_better" if lower_first else "a_better"}}, uuid.uuid4()
    )
    assert (item_of(batch).extra_overlap, item_of(batch).is_open) == (1, True)


def test_rankings_disagree_under_the_kendall_threshold(django_user_model):
    batch = make_batch("ranking", overlap=2, max_overlap=3)  # threshold 0: a negative tau disagrees
    bob, carol, dave, erin = labelers(django_user_model, "bob", "carol", "dave", "erin")
    rank(bob, [0, 1, 2, 3])
    rank(carol, [1, 0, 3, 2])  # tau 1/3
    assert item_of(batch).extra_overlap == 0
    FeedbackBatch.objects.update(rank_agreement_threshold=0.5)
    Assignment.objects.filter(labeler=carol).delete()  # judge the same pair again under the new threshold
    FeedbackItem.objects.update(slots_taken=1, is_open=True)
    rank(dave, [1, 0, 3, 2])
    assert item_of(batch).extra_overlap == 1
    rank(erin, [3, 2, 1, 0])
    assert (item_of(batch).target_overlap, item_of(batch).is_open) == (3, False)


def test_reversed_rankings_disagree_by_default(django_user_model):
    batch = make_batch("ranking", overlap=2, max_overlap=3)
    bob, carol = labelers(django_user_model, "bob", "carol")
    rank(bob, [0, 1, 2, 3])
    rank(carol, [3, 2, 1, 0])  # tau -1
    assert item_of(batch).extra_overlap == 1


def test_ratings_never_ask_for_more(django_user_model):
    batch = make_batch("rating", overlap=2, max_overlap=3)
    bob, carol = labelers(django_user_model, "bob", "carol")
    for person, verdict in ((bob, "yes"), (carol, "no")):
        task = work.next_assignment(person)
        work.submit(task.pk, person, {"truthful": verdict, "informative": verdict}, uuid.uuid4())
    assert item_of(batch).extra_overlap == 0


def test_gold_items_and_screening_tests_never_ask_for_more(django_user_model):
    gold = make_batch("minimal_comparison", overlap=2, max_overlap=3)
    FeedbackItem.objects.update(is_gold=True, gold_expected={"preference": 1.0})
    bob, carol = labelers(django_user_model, "bob", "carol")
    compare(bob, LOWER)
    compare(carol, HIGHER)
    assert item_of(gold).extra_overlap == 0
    FeedbackBatch.objects.update(is_active=False)
    rows = [{"question": "why is the sky blue", "answer": f"other {i}"} for i in range(2)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings(
        "test", "minimal_comparison", overlap=2, max_overlap=3, is_screening=True, required_probability=0.0
    )
    screening = create_feedback_batch(None, config, [answers])
    ann, ben, cat = (
        make_user(django_user_model, name, "labeler", applicant=True) for name in ("a", "b", "c")
    )
    compare(ann, LOWER)
    compare(ben, HIGHER)
    compare(cat, LOWER)  # every applicant takes a screening item
    assert item_of(screening).extra_overlap == 0


# Results, the batch page and exports -----------------------------------------------------------------------


def export_rows(export_format: str, **filters) -> list:
    out = io.BytesIO()
    exports.write_rows(export_format, filters, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_results_the_batch_page_and_exports_show_the_final_overlap(django_user_model, client_for, alice):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=3)
    # A second item on another question that nobody disagrees on, and a third nobody judged.
    import_questions(
        b'{"question": "Why is grass green?"}\n{"question": "Why is the sea salty?"}', filename="r"
    )
    for question in ("why is grass green", "why is the sea salty"):
        rows = [{"question": question, "answer": f"{question} {i}"} for i in range(2)]
        answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
        FeedbackItem.objects.create(batch=batch, question=answers[0].question).answers.set(answers)
    bob, carol, dave = labelers(django_user_model, "bob", "carol", "dave")
    first = FeedbackItem.objects.filter(batch=batch).order_by("id")[0]
    compare(bob, LOWER)  # the first item (lowest id first)
    compare(carol, HIGHER)  # the first item: they disagree
    compare(dave, LOWER)  # the first item's extra judgement
    compare(bob, LOWER)  # the second item
    compare(carol, LOWER)  # the second: agreement

    summary = batch_results(batch)["overlap"]
    assert summary == {
        "max_overlap": 3,
        "items": 3,
        "extra_items": 1,
        "extra_judgements": 1,
        "distribution": [{"overlap": 0, "items": 1}, {"overlap": 2, "items": 1}, {"overlap": 3, "items": 1}],
    }
    client = client_for(alice)
    page = client.get(reverse("console:feedback_results", args=[batch.pk])).content.decode()
    assert "1 of 3 items asked for more on disagreement (1 in all; up to 3 per item)" in page
    assert "Final overlap of the items" in page
    csv = client.get(reverse("console:feedback_results_csv", args=[batch.pk, "overlap"])).content.decode()
    assert csv.splitlines() == ["Final overlap (submitted judgements),Items", "0,1", "2,1", "3,1"]
    detail = client.get(reverse("console:feedback_batch", args=[batch.pk])).content.decode()
    assert "1 of 3 items asked for extra judgements on disagreement (1 extra in all)" in detail
    assert "up to 3 on disagreement" in detail
    assert '<th scope="row" class="num">3</th><td class="num">1</td>' in detail
    assert client.get(f"/api/batches/{batch.pk}").json()["progress"]["needed"] == 3 * 2 + 1

    full = export_rows("comparisons-full")
    overlaps = {(row["assignment"], row["overlap"], row["target_overlap"]) for row in full}
    by_item = dict(Assignment.objects.values_list("pk", "item_id"))
    assert {(by_item[pk] == first.pk, o, t) for pk, o, t in overlaps} == {(True, 3, 3), (False, 2, 2)}
    pairs = export_rows("rm-pairs")
    assert sorted((row["overlap"], row["target_overlap"]) for row in pairs) == [
        (2, 2),
        (2, 2),
        (3, 3),
        (3, 3),
        (3, 3),
    ]
    public = export_rows("webgpt-comparisons")
    assert all("overlap" not in row for row in public)  # the public dataset's layout stays as it is


def test_ranking_groups_carry_the_final_overlap(django_user_model):
    make_batch("ranking", overlap=2, max_overlap=3)
    bob, carol, dave = labelers(django_user_model, "bob", "carol", "dave")
    rank(bob, [0, 1, 2, 3])
    rank(carol, [3, 2, 1, 0])
    rank(dave, [0, 1, 2, 3])
    groups = export_rows("rm-groups")
    assert [(group["overlap"], group["target_overlap"]) for group in groups] == [(3, 3)] * 3


def test_rm_pairs_parquet_carries_the_overlap_columns(django_user_model):
    import pyarrow.parquet as pq

    make_batch("minimal_comparison", overlap=1, max_overlap=None)
    (bob,) = labelers(django_user_model, "bob")
    compare(bob, LOWER)
    out = io.BytesIO()
    exports.write_rows("rm-pairs", {}, out, file_type="parquet")
    table = pq.read_table(io.BytesIO(out.getvalue()))
    assert table.column("overlap").to_pylist() == [1] and table.column("target_overlap").to_pylist() == [1]


def test_exports_leave_out_screening_tests_and_work_excluded_on_a_revocation(django_user_model):
    production = make_batch("minimal_comparison", overlap=2, max_overlap=None)
    bob, carol = labelers(django_user_model, "bob", "carol")
    early = compare(bob, LOWER)
    later = compare(carol, LOWER)
    rows = [{"question": "why is the sky blue", "answer": f"test {i}"} for i in range(2)]
    answers = import_answers("\n".join(json.dumps(row) for row in rows).encode())
    config = BatchSettings("test", "minimal_comparison", is_screening=True, required_probability=0.0)
    create_feedback_batch(None, config, [answers])
    applicant = make_user(django_user_model, "newcomer", "labeler", applicant=True)
    test_judgement = compare(applicant, HIGHER)
    assert test_judgement.item.batch.is_screening
    every = {row["assignment"] for row in export_rows("comparisons-full")}
    assert every == {early.pk, later.pk}  # the screening judgement is a test, not data
    assert len(export_rows("rm-pairs")) == len(export_rows("webgpt-comparisons")) == 2
    assert len(export_rows("rm-pairs", batch=production.pk)) == 2

    # bob's work before his exclusion is left out; carol's of the same time, and bob's later work, stay.
    two_days_ago = timezone.now() - timedelta(days=2)
    for pk in (early.pk, later.pk):
        Assignment.objects.filter(pk=pk).update(submitted_at=two_days_ago, first_submitted_at=two_days_ago)
    cutoff = timezone.now() - timedelta(days=1)
    Qualification.objects.filter(user=bob, kind="minimal_comparison").update(work_excluded_before=cutoff)
    assert {row["assignment"] for row in export_rows("comparisons-full")} == {later.pk}
    assert [row["assignment"] for row in export_rows("rm-pairs")] == [later.pk]
    assert len(export_rows("webgpt-comparisons-pairs")) == 1
    after = cutoff + timedelta(hours=1)
    Assignment.objects.filter(pk=early.pk).update(submitted_at=after, first_submitted_at=after)
    assert {row["assignment"] for row in export_rows("comparisons-full")} == {early.pk, later.pk}
    # An exclusion for another kind of work leaves this kind's alone.
    Qualification.objects.filter(user=carol, kind="rating:truthfulqa").update(
        work_excluded_before=timezone.now()
    )
    assert {row["assignment"] for row in export_rows("comparisons-full")} == {early.pk, later.pk}
    Qualification.objects.filter(user=carol, kind="minimal_comparison").update(
        work_excluded_before=timezone.now()
    )
    assert {row["assignment"] for row in export_rows("comparisons-full")} == {early.pk}


def test_a_rating_exclusion_is_by_preset(django_user_model):
    make_batch("rating", overlap=1, max_overlap=None)
    (bob,) = labelers(django_user_model, "bob")
    task = work.next_assignment(bob)
    work.submit(task.pk, bob, {"truthful": "yes", "informative": "yes"}, uuid.uuid4())
    assert len(export_rows("comparisons-full")) == 1
    Qualification.objects.filter(user=bob, kind="rating:gophercite").update(
        work_excluded_before=timezone.now()
    )
    assert len(export_rows("comparisons-full")) == 1
    Qualification.objects.filter(user=bob, kind="rating:truthfulqa").update(
        work_excluded_before=timezone.now()
    )
    assert export_rows("comparisons-full") == []


# Settings where a batch is made ---------------------------------------------------------------------------


def test_settings_are_checked_nan_included():
    base = {"name": "x", "template": "ranking"}
    for field_name, value in (
        ("gold_threshold", float("nan")),
        ("rank_agreement_threshold", float("nan")),
        ("agreement_cutoff", True),
        ("gold_min_items", 2.5),
        ("max_overlap", 0),
    ):
        with pytest.raises(BatchError) as refused:
            check_batch_settings(BatchSettings(**base, **{field_name: value}))
        assert refused.value.field == field_name
    defaults = BatchSettings(**base)
    stored = FeedbackBatch()
    for name in ("is_screening", "agreement_cutoff", "flag_cutoff", "gold_threshold", "gold_min_items"):
        assert getattr(defaults, name) == getattr(stored, name), name
    assert (defaults.max_overlap, defaults.rank_agreement_threshold) == (
        None,
        stored.rank_agreement_threshold,
    )


WORKFORCE = {
    "is_screening": True,
    "agreement_cutoff": 0.8,
    "flag_cutoff": 0.7,
    "gold_threshold": 0.5,
    "gold_min_items": 20,
    "max_overlap": 4,
    "rank_agreement_threshold": 0.25,
}


def _stored(name: str) -> dict:
    batch = FeedbackBatch.objects.get(name=name)
    return {field_name: getattr(batch, field_name) for field_name in WORKFORCE}


@pytest.fixture
def bank():
    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    rows = [{"question": "why is the sky blue", "answer": f"answer {i}"} for i in range(4)]
    import_answers("\n".join(json.dumps(row) for row in rows).encode())


def test_the_form_the_api_and_the_command_take_the_workforce_settings(client_for, alice, bank):
    form = {
        "name": "page",
        "template": "ranking",
        "source": "bank",
        "overlap": 2,
        "required_probability": 0.1,
    }
    form |= {"lease_minutes": 30, "revision_minutes": 60}
    client = client_for(alice)
    assert client.post(reverse("console:feedback_create"), {**form, **WORKFORCE}).status_code == 302
    assert _stored("page") == WORKFORCE
    body = {"name": "api", "template": "ranking", "source": "bank", "overlap": 2, **WORKFORCE}
    created = client.post("/api/batches", body, content_type="application/json")
    assert created.status_code == 201, created.json()
    assert _stored("api") == WORKFORCE
    assert {name: created.json()[name] for name in WORKFORCE} == WORKFORCE
    call_command(
        "create_feedback_batch",
        "command",
        "--template",
        "ranking",
        "--source",
        "bank",
        "--overlap",
        "2",
        "--screening",
        "--agreement-cutoff",
        "0.8",
        "--flag-cutoff",
        "0.7",
        "--gold-threshold",
        "0.5",
        "--gold-min-items",
        "20",
        "--max-overlap",
        "4",
        "--rank-agreement-threshold",
        "0.25",
        stdout=io.StringIO(),
    )
    assert _stored("command") == WORKFORCE


def test_left_out_the_workforce_settings_take_the_models_defaults(client_for, alice, bank):
    form = {
        "name": "page",
        "template": "ranking",
        "source": "bank",
        "overlap": 1,
        "required_probability": 0.1,
    }
    form |= {"lease_minutes": 30, "revision_minutes": 60}
    client = client_for(alice)
    assert client.post(reverse("console:feedback_create"), form).status_code == 302
    body = {"name": "api", "template": "ranking", "source": "bank"}
    assert client.post("/api/batches", body, content_type="application/json").status_code == 201
    call_command(
        "create_feedback_batch", "command", "--template", "ranking", "--source", "bank", stdout=io.StringIO()
    )
    defaults = {name: getattr(FeedbackBatch(), name) for name in WORKFORCE}
    assert defaults["max_overlap"] is None and defaults["is_screening"] is False
    for name in ("page", "api", "command"):
        assert _stored(name) == defaults, name
    page = client.get(reverse("console:feedback")).content.decode()
    assert "Ratings never ask for more" in page and "the overlap settings do not apply" in page


def test_demonstration_batches_take_screening_and_the_grade_cutoff(client_for, alice):
    from annotation.models import DemonstrationBatch

    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    out = io.StringIO()
    call_command("create_demonstration_batch", "test", "--screening", "--grade-cutoff", "5.5", stdout=out)
    assert "a screening test (grade cutoff 5.5)" in out.getvalue()
    batch = DemonstrationBatch.objects.get(name="test")
    assert (batch.is_screening, batch.grade_cutoff) == (True, 5.5)
    call_command("create_demonstration_batch", "plain", stdout=io.StringIO())
    plain = DemonstrationBatch.objects.get(name="plain")
    assert (plain.is_screening, plain.grade_cutoff) == (False, 6.0)
    with pytest.raises(CommandError, match="the grade cutoff is a 1-7 grade, 1 to 7"):
        call_command("create_demonstration_batch", "bad", "--grade-cutoff", "8", stdout=io.StringIO())
    client = client_for(alice)
    form = {
        "name": "page test",
        "split": "",
        "limit": 10,
        "overlap": 1,
        "is_screening": "on",
        "grade_cutoff": 6.5,
    }
    assert client.post(reverse("console:demonstration_batches"), form).status_code == 302
    made = DemonstrationBatch.objects.get(name="page test")
    assert (made.is_screening, made.grade_cutoff) == (True, 6.5)
    refused = client.post(reverse("console:demonstration_batches"), {**form, "name": "x", "grade_cutoff": 0})
    assert refused.status_code == 400 and not DemonstrationBatch.objects.filter(name="x").exists()
    page = client.get(reverse("console:demonstration_batches")).content.decode()
    assert "page test (screening test, grade cutoff 6.5)" in page
    assert DemonstrationBatch.objects.count() == 3


def test_demonstration_exports_leave_out_screening_tests_and_work_excluded_on_a_revocation(dana):
    from annotation.demonstrations.batches import create_demonstration_batch
    from annotation.models import DEMONSTRATION, Episode, EpisodeStatus, Question

    import_questions(b'{"question": "Why is the sky blue?"}', filename="q.jsonl")
    question = Question.objects.get()
    test = create_demonstration_batch(None, "test", Question.objects.all(), is_screening=True)
    real = create_demonstration_batch(None, "real", Question.objects.all())
    now = timezone.now()

    def finished(batch, days_ago: int) -> Episode:
        return Episode.objects.create(
            user=dana,
            question=question,
            batch=batch,
            status=EpisodeStatus.FINISHED,
            settings={},
            state={"quotes": []},
            answer="Scattering.",
            finished_at=now - timedelta(days=days_ago),
        )

    screening, early, unbatched, late = (
        finished(test, 5),
        finished(real, 4),
        finished(None, 3),
        finished(real, 1),
    )
    assert {row["episode"] for row in export_rows("demonstrations")} == {early.pk, unbatched.pk, late.pk}
    Qualification.objects.filter(user=dana, kind=DEMONSTRATION).update(
        work_excluded_before=now - timedelta(days=2)
    )
    assert {row["episode"] for row in export_rows("demonstrations")} == {late.pk}
    assert screening.pk not in {row["episode"] for row in export_rows("demonstrations", episode_kind="all")}


def test_a_majority_after_the_extra_judgement_settles_the_item(django_user_model):
    batch = make_batch("minimal_comparison", overlap=2, max_overlap=5)
    bob, carol, dave, erin = labelers(django_user_model, "bob", "carol", "dave", "erin")
    compare(bob, LOWER)
    compare(carol, HIGHER)
    assert item_of(batch).target_overlap == 3
    compare(dave, LOWER)  # 2 against 1
    item = item_of(batch)
    assert (item.target_overlap, item.is_open) == (3, False)
    assert work.next_assignment(erin) is None
