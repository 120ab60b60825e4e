"""Krippendorff's alpha against hand-computed values, Krippendorff's own example and the ``krippendorff``
package as the reference implementation; the bootstrap interval by item; a batch's alphas measure by
measure, a template's across batches, and the batch page that shows them."""

from __future__ import annotations

from datetime import timedelta

import krippendorff
import numpy as np
import pytest
from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from annotation.feedback.alpha import DEFAULT_RESAMPLES, DEFAULT_SEED, krippendorff_alpha
from annotation.feedback.alpha_stats import batch_alpha, cache_key, template_alpha
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    FlagDecision,
    Qualification,
    Question,
    Split,
)
from tests.conftest import make_user

NAN = np.nan

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers, 12 units,
# values 1-5, missing values. His published results: nominal 0.743, ordinal 0.815.
TEXTBOOK = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def as_units(matrix) -> dict[int, dict[int, object]]:
    """A coders x units matrix (NaN missing) as units -> {coder: value}, missing values left out."""
    rows = np.asarray(matrix, dtype=float)
    return {
        unit: {
            coder: int(rows[coder, unit]) for coder in range(rows.shape[0]) if not np.isnan(rows[coder, unit])
        }
        for unit in range(rows.shape[1])
    }


def test_a_nominal_example_by_hand():
    # Coincidences: (a,a) unit 1 gives o_aa = 2; (a,b) o_ab = o_ba = 1; (b,b) o_bb = 2. n_a = n_b = 3, n = 6.
    # D_o = 2/6, D_e = 2 * 3 * 3 / (6 * 5) = 3/5, alpha = 1 - (1/3) / (3/5) = 4/9.
    units = {1: {"x": "a", "y": "a"}, 2: {"x": "a", "y": "b"}, 3: {"x": "b", "y": "b"}}
    result = krippendorff_alpha(units, "nominal", resamples=0)
    assert result.alpha == pytest.approx(4 / 9)
    assert (result.units, result.items, result.values) == (3, 3, 6)
    assert (result.low, result.high) == (None, None)


def test_an_ordinal_example_by_hand():
    # Units (1,1), (1,2), (3,3), (2,3): o_11 = 2, o_12 = o_21 = 1, o_33 = 2, o_23 = o_32 = 1;
    # n_1 = 3, n_2 = 2, n_3 = 3, n = 8. Distances from the marginals: d_12 = ((3 + 2) / 2)^2 = 6.25,
    # d_23 = ((2 + 3) / 2)^2 = 6.25, d_13 = (8 - (3 + 3) / 2)^2 = 25.
    # sum o d = 2 * 6.25 + 2 * 6.25 = 25; sum n_c n_k d = 2 * (6 * 6.25 + 6 * 6.25 + 9 * 25) = 600;
    # alpha = 1 - (n - 1) * 25 / 600 = 1 - 175 / 600 = 17/24.
    units = {1: {"x": 1, "y": 1}, 2: {"x": 1, "y": 2}, 3: {"x": 3, "y": 3}, 4: {"x": 2, "y": 3}}
    assert krippendorff_alpha(units, "ordinal", resamples=0).alpha == pytest.approx(17 / 24)
    # The numbers the points are written with do not matter, only their order: 1 < 2 < 3 as 1 < 10 < 11.
    stretched = {u: {c: {1: 1, 2: 10, 3: 11}[v] for c, v in by.items()} for u, by in units.items()}
    assert krippendorff_alpha(stretched, "ordinal", resamples=0).alpha == pytest.approx(17 / 24)
    # Nominal on the same data: o off the diagonal 4, n = 8; sum n_c n_k (c != k) = 2 * (6 + 6 + 9) = 42;
    # alpha = 1 - 7 * 4 / 42 = 1/3.
    assert krippendorff_alpha(units, "nominal", resamples=0).alpha == pytest.approx(1 / 3)


def test_krippendorffs_textbook_example():
    units = as_units(TEXTBOOK)
    nominal = krippendorff_alpha(units, "nominal", resamples=0)
    ordinal = krippendorff_alpha(units, "ordinal", domain=[1, 2, 3, 4, 5], resamples=0)
    assert round(nominal.alpha, 3) == 0.743
    assert round(ordinal.alpha, 3) == 0.815
    # Unit 12 has one value: not pairable, dropped. 11 units, 40 values.
    assert (nominal.units, nominal.values) == (11, 40)


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_the_same_as_the_reference_implementation_on_random_data_with_missing_values(level):
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(150):
        coders, count = rng.integers(2, 6), rng.integers(2, 25)
        data = rng.integers(1, 6, size=(coders, count)).astype(float)
        data[rng.random((coders, count)) < 0.35] = NAN
        try:
            expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        except ValueError:  # fewer than two values in the data or no pairable unit
            expected = NAN
        mine = krippendorff_alpha(as_units(data), level, resamples=0).alpha
        if np.isnan(expected):
            assert mine is None
        else:
            assert mine == pytest.approx(expected, abs=1e-9)
            compared += 1
    assert compared > 100


def test_string_codes_on_an_ordered_scale_match_the_reference():
    scale = ["a_much_better", "a_better", "equal", "b_better", "b_much_better"]
    rows = [
        ["a_better", "equal", "b_better", "a_much_better", "equal", None],
        ["a_much_better", "equal", "b_much_better", "a_better", "b_better", "equal"],
        ["a_better", None, "b_better", "equal", "equal", "a_better"],
    ]
    units = {u: {c: rows[c][u] for c in range(3) if rows[c][u] is not None} for u in range(6)}
    numeric = [[NAN if v is None else scale.index(v) for v in row] for row in rows]
    expected = krippendorff.alpha(reliability_data=numeric, level_of_measurement="ordinal")
    assert krippendorff_alpha(units, "ordinal", domain=scale, resamples=0).alpha == pytest.approx(expected)
    with pytest.raises(ValueError, match="outside the domain"):
        krippendorff_alpha(units, "ordinal", domain=scale[:3])


def test_no_pairable_unit_is_none_and_units_with_one_value_are_dropped():
    result = krippendorff_alpha({1: {"x": 1}, 2: {"y": 2, "z": None}, 3: {}}, "nominal")
    assert result.alpha is None and not result.no_variation
    assert (result.units, result.items, result.values) == (0, 0, 0)
    with_single = {1: {"x": "a", "y": "a"}, 2: {"x": "a", "y": "b"}, 3: {"x": "b", "y": "b"}, 4: {"x": "b"}}
    assert krippendorff_alpha(with_single, "nominal", resamples=0).alpha == pytest.approx(4 / 9)


def test_all_values_the_same_is_undefined_not_one():
    result = krippendorff_alpha({1: {"x": 3, "y": 3}, 2: {"x": 3, "y": 3, "z": 3}}, "ordinal")
    assert result.alpha is None and result.no_variation
    assert (result.units, result.values) == (2, 5)
    assert (result.low, result.high) == (None, None)


def test_coders_who_agree_on_every_unit_with_variation_have_alpha_one():
    units = {1: {"x": 1, "y": 1}, 2: {"x": 2, "y": 2}, 3: {"x": 5, "y": 5, "z": 5}}
    result = krippendorff_alpha(units, "ordinal", resamples=200)
    assert result.alpha == pytest.approx(1.0)
    # A draw of one unit only has no variation and is left out; every other draw is 1.
    assert result.low == pytest.approx(1.0) and result.high == pytest.approx(1.0)


def test_the_bootstrap_is_seeded_and_brackets_the_estimate():
    units = as_units(TEXTBOOK)
    first = krippendorff_alpha(units, "ordinal", resamples=1000, seed=3)
    again = krippendorff_alpha(units, "ordinal", resamples=1000, seed=3)
    other = krippendorff_alpha(units, "ordinal", resamples=1000, seed=4)
    assert (first.low, first.high) == (again.low, again.high)
    assert (first.low, first.high) != (other.low, other.high)
    assert first.low < first.alpha < first.high <= 1.0
    assert first.resamples == 1000


def test_the_bootstrap_draws_items_so_units_of_one_item_move_together():
    units = as_units(TEXTBOOK)
    # Every unit in one item: each draw is the whole data again, so the interval is the estimate itself.
    one_item = krippendorff_alpha(units, "nominal", clusters=dict.fromkeys(units, "q"), resamples=200)
    assert one_item.items == 1
    assert one_item.low == pytest.approx(one_item.alpha) and one_item.high == pytest.approx(one_item.alpha)
    alone = krippendorff_alpha(units, "nominal", resamples=200)
    assert alone.items == 11 and alone.low < alone.alpha < alone.high


def test_the_bootstrap_matches_resampling_items_one_by_one_with_the_reference_implementation():
    # Drawing counts of each kind of item (multinomial) is the same distribution as drawing items one by
    # one; compare with the plain way, the package's alpha on each resample of the pairable units.
    data = np.asarray(TEXTBOOK, dtype=float)
    pairable = [unit for unit in range(data.shape[1]) if (~np.isnan(data[:, unit])).sum() >= 2]
    rng = np.random.default_rng(11)
    plain = []
    for _ in range(3000):
        sample = data[:, rng.choice(pairable, size=len(pairable))]
        value = krippendorff.alpha(
            reliability_data=sample, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
        )
        if not np.isnan(value):
            plain.append(value)
    low, high = np.percentile(plain, [2.5, 97.5])
    mine = krippendorff_alpha(as_units(TEXTBOOK), "ordinal", domain=[1, 2, 3, 4, 5], resamples=3000, seed=2)
    assert mine.low == pytest.approx(low, abs=0.04)
    assert mine.high == pytest.approx(high, abs=0.01)


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha({1: {"x": 1, "y": 2}}, "interval")  # type: ignore[arg-type]


# A batch's alpha, measure by measure ---------------------------------------------------------------------


def ask(text: str) -> Question:
    return Question.objects.create(text=text, key=text[:64], dataset="demo", split=Split.EVAL)


def item_with(batch: FeedbackBatch, count: int, text: str) -> tuple[FeedbackItem, list[Answer]]:
    question = ask(text)
    answers = [
        Answer.objects.create(question=question, text=f"answer {i}", source_kind="model")
        for i in range(count)
    ]
    item = FeedbackItem.objects.create(batch=batch, question=question)
    item.answers.set(answers)
    return item, answers


def judge(item, labeler, shown, response, status=AssignmentStatus.SUBMITTED, **extra) -> Assignment:
    """A labeler's work as the task page stores it: ``shown`` is the order drawn (slot A / 1 first)."""
    now = timezone.now()
    return Assignment.objects.create(
        item=item,
        labeler=labeler,
        order=[answer.pk for answer in shown],
        status=status,
        response=response,
        leased_until=now + timedelta(hours=1),
        submitted_at=now,
        **extra,
    )


def overall(code: str, **flags: bool) -> dict:
    return {"ratings": {"overall": code}, "flags": {"nonsense": False, "should_not_answer": False, **flags}}


def reference(rows: list[list], level: str, domain: list) -> float:
    """The package's alpha of coders x units rows (None missing)."""
    data = [[NAN if value is None else value for value in row] for row in rows]
    return krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain)


@pytest.fixture
def people(django_user_model):
    return [make_user(django_user_model, name, "labeler") for name in ("bob", "carol", "dave")]


@pytest.fixture
def comparisons(people):
    """Three items judged by bob and carol in different display orders, and work that must not count."""
    bob, carol, dave = people
    batch = FeedbackBatch.objects.create(name="pairs", template="webgpt_comparison")
    first, (low1, high1) = item_with(batch, 2, "q1")
    second, (low2, high2) = item_with(batch, 2, "q2")
    third, (low3, high3) = item_with(batch, 2, "q3")
    # For the lower id: item 1 bob -0.5 (A better, the higher id shown first), carol -0.5;
    # item 2 bob 1, carol 0; item 3 bob -1, carol -0.5 (dave's judgement was excluded on flag review).
    judge(first, bob, [high1, low1], overall("a_better"))
    judge(first, carol, [low1, high1], overall("b_better"))
    judge(second, bob, [low2, high2], overall("a_much_better"))
    judge(second, carol, [high2, low2], overall("equal"))
    judge(third, bob, [low3, high3], overall("b_much_better"))
    judge(third, carol, [low3, high3], overall("b_better"))
    judge(third, dave, [low3, high3], overall("a_much_better"), flag_decision=FlagDecision.EXCLUDE)
    # Left out: a late one, a skipped one and a researcher's reference.
    judge(first, dave, [low1, high1], overall("a_much_better"), status=AssignmentStatus.LATE)
    judge(second, dave, [low2, high2], {}, status=AssignmentStatus.SKIPPED)
    fourth, (low4, high4) = item_with(batch, 2, "q4")
    judge(fourth, dave, [low4, high4], overall("a_much_better"), status=AssignmentStatus.REFERENCE)
    # Item 4: bob flags the question as nonsense (no rating), carol rates it.
    judge(fourth, bob, [low4, high4], {"flags": {"nonsense": True, "should_not_answer": False}})
    judge(fourth, carol, [high4, low4], overall("equal"))
    return batch


@pytest.mark.django_db
def test_a_comparison_batch_has_the_ordinal_alpha_of_its_preference_for_the_same_answer(comparisons):
    rows = {row.measure: row for row in batch_alpha(comparisons)}
    assert list(rows) == ["overall", "flags"]  # dimensions nobody rated are left out
    preference = rows["overall"].result
    domain = [-1.0, -0.5, 0.0, 0.5, 1.0]
    expected = reference([[-0.5, 1.0, -1.0, None], [-0.5, 0.0, -0.5, 0.0]], "ordinal", domain)
    assert preference.alpha == pytest.approx(expected)
    assert (preference.level, preference.units, preference.items, preference.values) == ("ordinal", 3, 3, 6)
    assert preference.low <= preference.alpha <= preference.high
    # Had the display order not been undone, item 1 would be a disagreement (0.5 against -0.5).
    assert preference.alpha != pytest.approx(
        reference([[0.5, 1.0, -1.0], [-0.5, 0.0, -0.5]], "ordinal", domain)
    )


@pytest.mark.django_db
def test_work_a_revocation_excluded_is_left_out_as_exports_leave_it_out(comparisons, people):
    _, carol, _ = people
    cutoff = timezone.now() - timedelta(days=1)
    Assignment.objects.filter(item__question__text="q1", labeler=carol).update(
        submitted_at=cutoff - timedelta(days=1), first_submitted_at=cutoff - timedelta(days=1)
    )
    # An exclusion of another kind of work leaves this kind's alpha alone.
    Qualification.objects.filter(user=carol, kind="ranking").update(work_excluded_before=timezone.now())
    assert batch_alpha(comparisons)[0].result.items == 3
    excluded = Qualification.objects.filter(user=carol, kind="webgpt_comparison")
    assert excluded.update(work_excluded_before=cutoff) == 1
    preference = batch_alpha(comparisons)[0].result
    # carol's judgement of item 1 came before the cutoff: bob's alone is no pairable unit.
    domain = [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert preference.alpha == pytest.approx(
        reference([[-0.5, 1.0, -1.0, None], [None, 0.0, -0.5, 0.0]], "ordinal", domain)
    )
    assert (preference.units, preference.items) == (2, 2)
    assert template_alpha("webgpt_comparison")[0].result.items == 2


@pytest.mark.django_db
def test_the_question_flags_are_a_nominal_yes_or_no_per_item_and_flag(comparisons):
    flags = {row.measure: row for row in batch_alpha(comparisons)}["flags"].result
    # Units (item, flag): bob and carol both say no on items 1-3 for both flags, and on item 4 for
    # "should not answer"; on item 4 bob says yes to "nonsense", carol no.
    no, yes = 0, 1
    rows = [[no] * 6 + [yes, no], [no] * 6 + [no, no]]
    assert flags.alpha == pytest.approx(reference(rows, "nominal", [no, yes]))
    assert (flags.level, flags.units, flags.items, flags.values) == ("nominal", 8, 4, 16)


@pytest.mark.django_db
def test_a_ranking_batch_has_alphas_of_ranks_and_likert_per_answer(people):
    bob, carol, _ = people
    batch = FeedbackBatch.objects.create(name="ranks", template="ranking")
    item, (a, b, c, d) = item_with(batch, 4, "rank these")
    # Positions are the display order: bob saw a b c d, carol d c b a.
    judge(item, bob, [a, b, c, d], {"ranks": {"1": 1, "2": 2, "3": 3, "4": 4}, "likert": {"1": 7, "2": 5}})
    judge(item, carol, [d, c, b, a], {"ranks": {"1": 4, "2": 2, "3": 3, "4": 1}, "likert": {"3": 4, "4": 6}})
    rows = {row.measure: row.result for row in batch_alpha(batch)}
    # By answer a, b, c, d: bob 1 2 3 4, carol 1 3 2 4; Likert a: 7 and 6, b: 5 and 4 (c, d by one only).
    assert rows["ranks"].alpha == pytest.approx(
        reference([[1, 2, 3, 4], [1, 3, 2, 4]], "ordinal", [1, 2, 3, 4])
    )
    assert (rows["ranks"].units, rows["ranks"].items) == (4, 1)
    assert rows["likert"].alpha == pytest.approx(reference([[7, 5], [6, 4]], "ordinal", [4, 5, 6, 7]))
    assert rows["likert"].units == 2


@pytest.mark.django_db
def test_a_rating_batch_has_a_nominal_alpha_per_yes_no_field_and_nothing_yet_says_so(people):
    bob, carol, _ = people
    batch = FeedbackBatch.objects.create(name="tqa", template="rating", preset="truthfulqa")
    for n, (mine, theirs) in enumerate([("yes", "yes"), ("no", "no"), ("yes", "no")]):
        item, (answer,) = item_with(batch, 1, f"claim {n}")
        judge(item, bob, [answer], {"truthful": mine, "informative": "yes"})
        judge(item, carol, [answer], {"truthful": theirs, "informative": "yes"})
    rows = {row.measure: row for row in batch_alpha(batch)}
    # o_yy = 2, o_nn = 2, o_yn = o_ny = 1; n = 6: alpha = 1 - 5 * 2 / (2 * 3 * 3) = 4/9.
    assert rows["truthful"].result.alpha == pytest.approx(4 / 9)
    assert rows["informative"].result.alpha is None and rows["informative"].result.no_variation
    assert (
        rows["informative"].text
        == "Krippendorff's alpha (nominal) undefined (no variation: every value the same), 3 items"
    )
    empty = FeedbackBatch.objects.create(name="empty", template="rating", preset="truthfulqa")
    assert [(row.measure, row.result.items) for row in batch_alpha(empty)] == [
        ("truthful", 0),
        ("informative", 0),
    ]


@pytest.mark.django_db
def test_the_template_alpha_pools_production_batches_and_leaves_screening_tests_out(comparisons, people):
    bob, carol, _ = people
    other = FeedbackBatch.objects.create(name="more pairs", template="webgpt_comparison")
    screening = FeedbackBatch.objects.create(name="test", template="webgpt_comparison", is_screening=True)
    for batch, codes_ in ((other, ("a_better", "a_much_better")), (screening, ("a_better", "b_better"))):
        item, (low, high) = item_with(batch, 2, f"{batch.name} q")
        judge(item, bob, [low, high], overall(codes_[0]))
        judge(item, carol, [low, high], overall(codes_[1]))
    preference = template_alpha("webgpt_comparison")[0].result
    domain = [-1.0, -0.5, 0.0, 0.5, 1.0]
    expected = reference([[-0.5, 1.0, -1.0, 0.5], [-0.5, 0.0, -0.5, 1.0]], "ordinal", domain)
    assert preference.alpha == pytest.approx(expected)
    assert preference.items == 4
    assert template_alpha("webgpt_comparison", include_screening=True)[0].result.items == 5


@pytest.mark.django_db
def test_the_bootstrap_is_cached_until_the_judgements_change(comparisons, people):
    bob, carol, _ = people

    def cached() -> list:
        # What the cache holds for the batch's judgements as they are now (None: not computed yet).
        tasks = list(
            Assignment.objects.filter(item__batch=comparisons, status=AssignmentStatus.SUBMITTED)
            .exclude(flag_decision=FlagDecision.EXCLUDE)
            .order_by("id")
            .values_list("item_id", "labeler_id", "order", "response")
        )
        key = cache_key("webgpt_comparison", "", tasks, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED)
        return cache.get(key)

    assert cached() is None
    first = batch_alpha(comparisons)
    assert cached() == first and batch_alpha(comparisons) == first
    # New judgements: bob and carol on a fifth item; the figures are computed again.
    item, (low, high) = item_with(comparisons, 2, "q5")
    judge(item, bob, [low, high], overall("a_much_better"))
    assert cached() is None
    assert batch_alpha(comparisons) == first  # bob's alone pairs with nobody: the same figures
    judge(item, carol, [high, low], overall("b_better"))
    assert cached() is None
    second = batch_alpha(comparisons)
    assert second[0].result.items == first[0].result.items + 1 and second != first
    assert cached() == second
    # A judgement excluded on flag review is another set of judgements too.
    Assignment.objects.filter(item=item, labeler=carol).update(flag_decision=FlagDecision.EXCLUDE)
    assert batch_alpha(comparisons) == first


@pytest.mark.django_db
def test_the_batch_page_shows_each_alpha_with_its_interval_and_items(
    client_for, comparisons, django_user_model
):
    researcher = make_user(django_user_model, "alice", "researcher")
    page = client_for(researcher).get(reverse("console:feedback_batch", args=[comparisons.pk]))
    assert page.status_code == 200
    row = {row.measure: row for row in batch_alpha(comparisons)}["overall"]
    text = page.content.decode()
    assert "Agreement statistics" in text
    assert f"{row.result.alpha:.2f}" in text
    assert f"{row.result.low:.2f} to {row.result.high:.2f}" in text
    assert "Overall usefulness (5-point preference)" in text
