"""Signals of careless work per labeler and kind, on batches worked through the real task flow
(``next_assignment`` / ``submit``), against hand-computed shares and Wilson intervals."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.agreement import wilson_interval
from annotation.feedback.batches import BatchSettings, create_feedback_batch
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    FlagDecision,
    Qualification,
    SourceKind,
)
from annotation.questions.service import import_questions
from annotation.workforce.signals import (
    make_signal,
    share,
    signals_for_batch,
    signals_for_kind,
    signals_for_user,
)
from tests.conftest import make_user

KIND = "minimal_comparison"


def make_batch(
    n_items: int, overlap: int, template: str, preset: str = "", name: str = "pairs", size: int = 2
):
    rows = b"\n".join(b'{"question": "%s question %d?"}' % (name.encode(), i) for i in range(n_items))
    report = import_questions(rows, filename=f"{name}.jsonl")
    groups = [
        [
            Answer.objects.create(question=question, text=f"Answer {n}.", source_kind=SourceKind.MODEL)
            for n in range(size)
        ]
        for question in report.questions.order_by("id")
    ]
    config = BatchSettings(
        name=name, template=template, preset=preset, overlap=overlap, required_probability=0.0
    )
    return create_feedback_batch(None, config, groups)


def work_through(labeler, batch, respond, *, lower_first: bool, seconds) -> list[Assignment]:
    """Take every item of ``batch`` the labeler is given, shown with the lower answer id first or second
    (the order the draw made, fixed here), answered by ``respond(index of the item)`` and with
    ``seconds(index)`` of active time."""
    items = list(batch.items.order_by("id").values_list("id", flat=True))
    done = []
    while (task := work.next_assignment(labeler)) is not None:
        order = sorted(task.order, reverse=not lower_first)
        Assignment.objects.filter(pk=task.pk).update(order=order)
        index = items.index(task.item_id)
        result = work.submit(task.pk, labeler, respond(index), uuid.uuid4())
        assert result.validation.complete, result.validation.errors
        Assignment.objects.filter(pk=task.pk).update(active_seconds=seconds(index))
        done.append(Assignment.objects.get(pk=task.pk))
    return done


def overall(code: str, **dimensions: str) -> dict:
    return {"ratings": {"overall": code, **dimensions}}


@pytest.fixture
def comparisons(django_user_model):
    """Six items, bob and carol on each. bob sees the lower id first and always says "A better": he
    prefers the answer shown first every time (the lower id). carol sees the higher id first and prefers
    the lower id ("B better") on items 0-3, says "equal" on 4 and 5; on item 0 her coherence rating
    contradicts her overall one. Times: bob 5 s on items 0-2 and 60 s on 3-5, carol 60 s on each.
    erin, an applicant, takes the kind's screening test: none of it counts."""
    bob = make_user(django_user_model, "bob", "labeler")
    carol = make_user(django_user_model, "carol", "labeler")
    erin = make_user(django_user_model, "erin", "labeler", applicant=True)
    batch = make_batch(6, 2, KIND)
    work_through(
        bob, batch, lambda i: overall("a_better"), lower_first=True, seconds=lambda i: 5 if i < 3 else 60
    )
    work_through(
        carol,
        batch,
        lambda i: (
            overall("b_better", coherence="a_better") if i == 0 else overall("b_better" if i < 4 else "equal")
        ),
        lower_first=False,
        seconds=lambda i: 60,
    )
    screening = make_batch(2, 1, KIND, name="test")
    screening.is_screening = True
    screening.save()
    assert (
        len(
            work_through(
                erin, screening, lambda i: overall("a_much_better"), lower_first=True, seconds=lambda i: 1
            )
        )
        == 2
    )
    return batch, bob, carol, erin


def assert_share(signal, successes, count):
    assert signal.mine.successes == pytest.approx(successes)
    assert signal.count == count
    assert signal.value == pytest.approx(successes / count)
    assert (signal.low, signal.high) == pytest.approx(wilson_interval(successes, count))


@pytest.mark.django_db
def test_each_signal_of_a_comparison_kind_by_hand(comparisons):
    _, bob, carol, _ = comparisons
    signals = signals_for_kind(KIND)
    assert set(signals) == {bob.pk, carol.pk}  # erin's screening test is not production work
    mine, hers = signals[bob.pk], signals[carol.pk]
    assert (mine.submitted, hers.submitted) == (6, 6)

    # Position bias: bob prefers the answer shown first 6 times in 6, Wilson (0.61, 1), which excludes 0.5;
    # carol the one shown second 4 times and says equal twice: 1 of 6, (0.03, 0.56).
    assert_share(mine.position_bias, 6, 6)
    assert mine.position_bias.low == pytest.approx(6 / (6 + 1.959963984540054**2))
    assert mine.position_bias.expected == 0.5 and mine.position_bias.notable
    assert_share(hers.position_bias, 0 * 4 + 0.5 * 2, 6)
    assert not hers.position_bias.notable
    # Against each other the two intervals do not overlap (0.61 > 0.56): notable both ways.
    assert mine.position_bias.others.value == pytest.approx(1 / 6)
    assert mine.position_bias.notable_vs_others and hers.position_bias.notable_vs_others
    assert mine.notable == [mine.position_bias]

    # "Equally good": bob 0 of 6, carol 2 of 6 (0.10, 0.70), which overlaps bob's (0, 0.39).
    assert_share(mine.constant_rating, 0, 6)
    assert_share(hers.constant_rating, 2, 6)
    assert hers.constant_rating.expected == 0.0 and mine.constant_rating.expected == pytest.approx(2 / 6)
    assert not hers.constant_rating.notable

    # Speed: twelve times, 5 5 5 and nine of 60: the median is 60 s, a third of it 20 s.
    assert mine.kind_median_seconds == 60 and hers.kind_median_seconds == 60
    assert (mine.median_seconds, hers.median_seconds) == (pytest.approx((5 + 60) / 2), 60)
    assert_share(mine.fast_tasks, 3, 6)
    assert_share(hers.fast_tasks, 0, 6)
    assert mine.fast_tasks.others.value == 0.0 and not mine.fast_tasks.notable  # (0.19, 0.81) vs (0, 0.39)
    assert "20 s" in mine.fast_tasks.detail and "60 s" in mine.fast_tasks.detail

    # Agreement: both prefer the lower id on items 0-3 (1 each); carol says equal on 4 and 5 (0.5 each).
    for signal in (mine.agreement, hers.agreement):
        assert_share(signal, 5, 6)
        assert signal.others.value == pytest.approx(5 / 6) and not signal.notable

    # Contradictions: carol's item 0 (coherence for A, overall for B).
    assert_share(hers.contradictions, 1, 6)
    assert_share(mine.contradictions, 0, 6)
    assert (
        hers.contradictions.expected == 0.0 and not hers.contradictions.notable
    )  # (0.03, 0.56) vs (0, 0.39)


@pytest.mark.django_db
def test_a_judgement_excluded_on_review_still_counts_as_work_but_not_its_content(comparisons):
    batch, bob, carol, _ = comparisons
    first = batch.items.order_by("id").first()
    Assignment.objects.filter(item=first, labeler=carol).update(flag_decision=FlagDecision.EXCLUDE)
    signals = signals_for_kind(KIND)
    assert signals[carol.pk].submitted == 6
    assert_share(signals[carol.pk].contradictions, 1, 6)  # work: all six submissions
    assert_share(signals[carol.pk].fast_tasks, 0, 6)
    assert_share(signals[carol.pk].position_bias, 1, 5)  # content: five judgements
    assert_share(signals[carol.pk].constant_rating, 2, 5)
    assert_share(signals[carol.pk].agreement, 3 + 1, 5)
    assert_share(signals[bob.pk].agreement, 3 + 1, 5)  # item 0 is no longer shared


@pytest.mark.django_db
def test_work_a_revocation_excluded_is_left_out_as_exports_leave_it_out(comparisons):
    batch, bob, carol, _ = comparisons
    first, second = batch.items.order_by("id")[:2]
    cutoff = timezone.now() - timedelta(days=1)
    Assignment.objects.filter(item__in=[first, second], labeler=carol).update(
        submitted_at=cutoff - timedelta(days=1), first_submitted_at=cutoff - timedelta(days=1)
    )
    # An exclusion of another kind of work leaves this kind's signals alone.
    Qualification.objects.filter(user=carol, kind="ranking").update(work_excluded_before=timezone.now())
    assert signals_for_kind(KIND)[carol.pk].submitted == 6
    assert Qualification.objects.filter(user=carol, kind=KIND).update(work_excluded_before=cutoff) == 1
    signals = signals_for_kind(KIND)
    assert signals[carol.pk].submitted == 4  # items 2-5: her work on items 0 and 1 came before the cutoff
    assert_share(signals[carol.pk].contradictions, 0, 4)  # her contradiction was on item 0
    assert_share(signals[carol.pk].position_bias, 0.5 * 2, 4)
    assert_share(signals[bob.pk].agreement, 2 + 0.5 * 2, 4)  # items 0 and 1 are no longer shared
    assert signals[bob.pk].submitted == 6


@pytest.mark.django_db
def test_one_user_one_batch_and_kinds_without_feedback(comparisons):
    batch, bob, _, erin = comparisons
    assert signals_for_user(bob, KIND) == signals_for_kind(KIND)[bob.pk]
    assert signals_for_user(erin.pk, KIND) is None
    assert signals_for_kind("demonstration") == {} and signals_for_kind("nonsense") == {}
    assert signals_for_kind("webgpt_comparison") == {}
    # The screening batch alone: erin is its only labeler, so there is nobody to compare her with.
    screening = FeedbackBatch.objects.get(is_screening=True)
    theirs = signals_for_batch(screening)[erin.pk]
    assert_share(theirs.position_bias, 2, 2)
    assert theirs.position_bias.others is None
    assert theirs.agreement.count == 0 and theirs.agreement.value is None
    assert theirs.fast_tasks.expected is None and not theirs.fast_tasks.notable
    assert [signal.code for signal in signals_for_batch(batch)[bob.pk].all] == [
        "position_bias",
        "constant_rating",
        "fast_tasks",
        "agreement",
        "contradictions",
    ]


def test_against_the_others_a_signal_is_notable_only_when_the_intervals_do_not_overlap():
    # 18 of 20 fast, Wilson (0.699, 0.972), against the others' 10 of 100, (0.055, 0.174): notable.
    fast = make_signal("fast_tasks", share(18, 20), share(10, 100), "above")
    assert (fast.low, fast.high) == pytest.approx((0.699, 0.972), abs=1e-3)
    assert fast.others.high == pytest.approx(0.174, abs=1e-3)
    assert fast.notable and fast.notable_vs_others and fast.expected == pytest.approx(0.1)
    # One contradiction in 6, (0.030, 0.564), against none in 50, (0, 0.071): they overlap.
    assert not make_signal("contradictions", share(1, 6), share(0, 50), "above").notable
    # Careless below: agreement 2 of 10 (0.057, 0.510) against 90 of 100 (0.826, 0.945).
    low = make_signal("agreement", share(2, 10), share(90, 100), "below")
    assert low.notable
    assert not make_signal("agreement", share(2, 10), share(90, 100), "above").notable
    # A fixed expectation: 9 of 10, (0.596, 0.982), excludes 0.5 whatever the others do.
    biased = make_signal("position_bias", share(9, 10), share(9, 10), "either", expected=0.5)
    assert biased.notable and not biased.notable_vs_others
    assert not make_signal("fast_tasks", share(0, 0), share(10, 100), "above").notable


def judge(item, labeler, response, order=None) -> Assignment:
    now = timezone.now()
    return Assignment.objects.create(
        item=item,
        labeler=labeler,
        order=order or list(item.answers.order_by("id").values_list("id", flat=True)),
        status=AssignmentStatus.SUBMITTED,
        response=response,
        leased_until=now + timedelta(hours=1),
        submitted_at=now,
    )


@pytest.mark.django_db
def test_ratings_have_the_modal_answer_share_and_field_agreement(django_user_model):
    bob = make_user(django_user_model, "bob", "labeler")
    carol = make_user(django_user_model, "carol", "labeler")
    batch = make_batch(4, 2, "rating", "truthfulqa", name="claims", size=1)
    items = list(FeedbackItem.objects.filter(batch=batch).order_by("id"))
    mine = [("yes", "yes"), ("yes", "yes"), ("yes", "yes"), ("no", "yes")]
    hers = [("yes", "yes"), ("no", "no"), ("no", "no"), ("no", "no")]
    for item, (truthful, informative), (t2, i2) in zip(items, mine, hers, strict=True):
        judge(item, bob, {"truthful": truthful, "informative": informative})
        judge(item, carol, {"truthful": t2, "informative": i2})
    signals = signals_for_kind("rating:truthfulqa")
    # bob's most frequent combination (yes, yes): 3 of 4; carol gave it once in 4.
    constant = signals[bob.pk].constant_rating
    assert_share(constant, 3, 4)
    assert constant.expected == pytest.approx(1 / 4)
    assert "yes, yes" in constant.detail
    # carol's (no, no): 3 of 4, bob never.
    assert_share(signals[carol.pk].constant_rating, 3, 4)
    assert signals[carol.pk].constant_rating.expected == 0.0
    # Fields alike per item: 1, 0, 0, 0.5 (item 3: truthful both no, informative yes against no).
    assert_share(signals[bob.pk].agreement, 1 + 0 + 0 + 0.5, 4)
    assert signals[bob.pk].position_bias is None and signals[bob.pk].contradictions is None


@pytest.mark.django_db
def test_rankings_have_the_modal_likert_share_and_pairwise_order_agreement(django_user_model):
    bob = make_user(django_user_model, "bob", "labeler")
    carol = make_user(django_user_model, "carol", "labeler")
    batch = make_batch(1, 2, "ranking", name="rank", size=4)
    item = batch.items.get()
    a, b, c, d = item.answers.order_by("id").values_list("id", flat=True)
    ranks = {"1": 1, "2": 2, "3": 3, "4": 4}
    judge(item, bob, {"ranks": ranks, "likert": {"1": 7, "2": 7, "3": 7, "4": 2}}, order=[a, b, c, d])
    # carol saw d c b a and ranked them 4 3 1 2: a 2, b 1, c 3, d 4. Only (a, b) is reversed: 5 of 6 pairs.
    hers = {"ranks": {"1": 4, "2": 3, "3": 1, "4": 2}, "likert": {"1": 5, "2": 5, "3": 6, "4": 4}}
    judge(item, carol, hers, order=[d, c, b, a])
    signals = signals_for_kind("ranking")
    assert_share(signals[bob.pk].agreement, 5 / 6, 1)
    assert_share(signals[carol.pk].agreement, 5 / 6, 1)
    # bob's most frequent 1-7 rating is 7, three of his four; carol never gave 7. Hers is 5, two of four.
    assert_share(signals[bob.pk].constant_rating, 3, 4)
    assert signals[bob.pk].constant_rating.expected == 0.0
    assert "(7)" in signals[bob.pk].constant_rating.detail
    assert_share(signals[carol.pk].constant_rating, 2, 4)
    assert signals[bob.pk].position_bias is None
