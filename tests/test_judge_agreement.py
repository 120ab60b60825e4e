"""A judge beside the labelers, against hand-computed values: its verdict per item (both orders, counting
only when they agree), its agreement with the labelers' majority and with each labeler next to the
labelers' own figures on the same items, with intervals by question, its position bias and confusion
tables; the labelers' judgements read as exports read them; then the results page, its CSVs and the API,
whose other figures stay the labelers' alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation.feedback.agreement import comparison_agreement
from annotation.feedback.results import batch_results, submissions
from annotation.judging.agreement import majority, majority_agreement, pair_agreement
from annotation.judging.report import judge_sections
from annotation.judging.verdicts import Asked, run_verdicts, verdict
from annotation.models import (
    AssignmentStatus,
    FeedbackBatch,
    FlagDecision,
    JudgeKind,
    JudgeRun,
    ModelJudgement,
    Qualification,
)
from tests.conftest import make_user
from tests.test_feedback_results import answers_to, ask, csv_rows, item_of, judge, ratings, results_url

pytestmark = pytest.mark.django_db
JUDGE_NAME = "<i>SmolLM2 judge</i>"


# Verdicts and majorities on plain values -------------------------------------------------------------------


def pair(code: str, swapped: bool = False, confidence: float | None = None) -> Asked:
    """A comparison judgement of answers 10 and 20, shown 10 first (or 20 first when swapped)."""
    order = (20, 10) if swapped else (10, 20)
    return Asked(swapped, order, {"ratings": {"overall": code}}, confidence)


def test_a_comparison_verdict_counts_when_both_orders_prefer_the_same_answer_whatever_the_strength():
    # Answer 10 "better" when shown first, "much better" when shown second (B): the same answer, so the
    # verdict counts, its preference for the lower id the mean of 0.5 and 1.0; confidence the mean too.
    found = verdict(
        "minimal_comparison", 1, [pair("a_better", confidence=0.9), pair("b_much_better", True, 0.6)]
    )
    assert (found.consistent, found.preference, found.confidence) == (True, 0.75, 0.75)
    assert found.counts and found.answers == (10, 20)
    # Slot A preferred in both orders: answer 10, then answer 20. It flips: no verdict.
    flipped = verdict("minimal_comparison", 1, [pair("a_better"), pair("a_better", True)])
    assert (flipped.consistent, flipped.judgement, flipped.counts) == (False, None, False)
    assert verdict("minimal_comparison", 1, [pair("equal"), pair("equal", True)]).preference == 0.0
    # Equal in one order, a preference in the other: a flip (the main measure differs).
    assert verdict("minimal_comparison", 1, [pair("equal"), pair("b_better", True)]).consistent is False


def test_without_both_orders_read_there_is_no_verdict_and_one_missing_confidence_makes_none():
    one_order = verdict("minimal_comparison", 1, [pair("a_better", confidence=0.9)])
    unreadable = verdict("minimal_comparison", 1, [pair("a_better"), Asked(True, (20, 10), None)])
    flagged = verdict(
        "minimal_comparison", 1, [pair("a_better"), Asked(True, (20, 10), {"flags": {"nonsense": True}})]
    )
    assert [v.consistent for v in (one_order, unreadable, flagged)] == [None, None, None]
    assert (
        verdict(
            "minimal_comparison", 1, [pair("a_better", confidence=0.9), pair("b_better", True)]
        ).confidence
        is None
    )


def test_a_ranking_verdict_needs_the_same_order_and_a_rating_verdict_the_same_choices():
    # Answers 1..4; ranks by slot. Reversed display, the same order (2 and 3 tied): consistent.
    first = Asked(False, (1, 2, 3, 4), {"ranks": {"1": 1, "2": 2, "3": 2, "4": 3}})
    same = Asked(True, (4, 3, 2, 1), {"ranks": {"1": 4, "2": 2, "3": 2, "4": 1}})  # 4 -> 4 is the same order
    other = Asked(True, (4, 3, 2, 1), {"ranks": {"1": 3, "2": 2, "3": 1, "4": 4}})  # 2 above 3 now
    assert verdict("ranking", 5, [first, same]).consistent is True
    assert verdict("ranking", 5, [first, same]).judgement == {"ranks": {"1": 1, "2": 2, "3": 2, "4": 3}}
    assert verdict("ranking", 5, [first, other]).consistent is False
    truthful = {"truthful": "yes", "informative": "no"}
    yes = Asked(False, (7,), truthful)
    assert verdict("rating", 7, [yes, Asked(True, (7,), dict(truthful))], "truthfulqa").consistent is True
    changed = Asked(True, (7,), {"truthful": "yes", "informative": "yes"})
    assert verdict("rating", 7, [yes, changed], "truthfulqa").consistent is False


def test_the_majority_is_more_than_half_unit_by_unit():
    assert (
        majority([1, 1, -1]) == 1
        and majority([1, -1]) is None
        and majority([0]) == 0
        and majority([]) is None
    )
    # Comparisons: the judge prefers the lower id; labelers +, +, - -> majority +: 1. Two who disagree: none.
    assert (
        majority_agreement(
            "minimal_comparison",
            {"preference": 0.5},
            [{"preference": 1.0}, {"preference": 0.5}, {"preference": -1.0}],
        )
        == 1.0
    )
    assert (
        majority_agreement(
            "minimal_comparison", {"preference": 0.5}, [{"preference": 0.0}, {"preference": -0.5}]
        )
        is None
    )
    assert majority_agreement("minimal_comparison", {"preference": 0.0}, [{"preference": -0.5}]) == 0.5
    # Rankings, pair by pair: the judge orders a < b < c. Labelers: a<b<c, b<a<c, a<b (c unranked).
    # (a,b): a first 2 of 3 -> agree 1; (a,c): 2 of 2 -> 1; (b,c): 2 of 2 -> 1. A judge with b<a: 0 on
    # (a,b).
    humans = [
        {"ranks": {"a": 1, "b": 2, "c": 3}},
        {"ranks": {"a": 2, "b": 1, "c": 3}},
        {"ranks": {"a": 1, "b": 2}},
    ]
    assert majority_agreement("ranking", {"ranks": {"a": 1, "b": 2, "c": 3}}, humans) == 1.0
    assert majority_agreement("ranking", {"ranks": {"a": 2, "b": 1, "c": 3}}, humans) == pytest.approx(2 / 3)
    # A tie against a majority's order: half, as between labelers.
    assert majority_agreement("ranking", {"ranks": {"a": 1, "b": 1, "c": 3}}, humans) == pytest.approx(5 / 6)
    # Ratings, field by field: truthful has a majority (yes, 2 of 3) and informative none (yes, no).
    fields = [
        {"fields": {"truthful": "yes", "informative": "yes"}},
        {"fields": {"truthful": "yes", "informative": "no"}},
        {"fields": {"truthful": "no"}},
    ]
    assert majority_agreement("rating", {"fields": {"truthful": "no", "informative": "no"}}, fields) == 0.0
    assert majority_agreement("rating", {"fields": {"truthful": "yes", "informative": "no"}}, fields) == 1.0
    assert pair_agreement("rating", {"fields": {"truthful": "yes", "informative": "no"}}, fields[0]) == 0.5


# A comparison batch with a judge run -----------------------------------------------------------------------


@pytest.fixture
def judged(bob, django_user_model):
    """Five items of three questions, side A the answer with the lower id (no sides); a judge run asked each
    in both orders. Below, "+" prefers the lower id. Work that must not count: a judgement excluded on flag
    review, a late one, and one a revocation excluded."""
    carol, dave, eve, frank = (
        make_user(django_user_model, n, "labeler") for n in ("carol", "dave", "eve", "frank")
    )
    batch = FeedbackBatch.objects.create(name="judged", template="minimal_comparison", overlap=3)
    q1, q2, q3 = (
        ask("Why is the sky blue?"),
        ask("Who won the 2022 AFL Grand Final?"),
        ask("How do bees fly?"),
    )
    pairs = [answers_to(q, 2) for q in (q1, q2, q3, q3, q2)]
    items = [item_of(batch, answers) for answers in pairs]
    (l1, h1), (l2, h2), (l3, h3), (l4, h4), (l5, h5) = pairs
    # Item 1: bob +, carol + (shown the higher id first, says B), dave -. Eve's - was excluded on review.
    judge(items[0], bob, [l1, h1], ratings(overall="a_better"))
    judge(items[0], carol, [h1, l1], ratings(overall="b_better"))
    judge(items[0], dave, [l1, h1], ratings(overall="b_better"))
    excluded = judge(items[0], eve, [l1, h1], ratings(overall="b_much_better"))
    excluded.flag_decision = FlagDecision.EXCLUDE
    excluded.save()
    # Item 2: bob equal, carol -; dave's late + does not count.
    judge(items[1], bob, [h2, l2], ratings(overall="equal"))
    judge(items[1], carol, [l2, h2], ratings(overall="b_better"))
    judge(items[1], dave, [l2, h2], ratings(overall="a_much_better"), status=AssignmentStatus.LATE)
    # Item 3: bob -, carol -.  Item 4: bob + (much); frank's - came before his revocation: left out.
    judge(items[2], bob, [l3, h3], ratings(overall="b_better"))
    judge(items[2], carol, [h3, l3], ratings(overall="a_better"))
    judge(items[3], bob, [h4, l4], ratings(overall="b_much_better"))
    judge(items[3], frank, [l4, h4], ratings(overall="b_better"))
    Qualification.objects.filter(user=frank, kind="minimal_comparison").update(
        work_excluded_before=timezone.now() + timedelta(hours=1)
    )
    run = JudgeRun.objects.create(
        batch=batch,
        judge_kind=JudgeKind.ENDPOINT,
        endpoint="local",
        judge_name=JUDGE_NAME,
        prompt_version="v1",
    )

    def model(item, shown, code, swapped, confidence=None, **more):
        ModelJudgement.objects.create(
            run=run,
            item=item,
            swapped=swapped,
            order=[answer.pk for answer in shown],
            response=ratings(overall=code, **more),
            confidence=confidence,
        )

    # Item 1: + in both orders (0.5 each), confidence 0.9 and 0.7; accuracy "equal" in both.
    model(items[0], [l1, h1], "a_better", False, 0.9, accuracy="equal")
    model(items[0], [h1, l1], "b_better", True, 0.7, accuracy="equal")
    # Item 2: + (much, then better).  Item 3: slot B in both orders, so it flips: + then -.
    model(items[1], [l2, h2], "a_much_better", False)
    model(items[1], [h2, l2], "b_better", True)
    model(items[2], [h3, l3], "b_better", False)
    model(items[2], [l3, h3], "b_better", True)
    # Item 4: + (much) in both.  Item 5, which no labeler judged: - in both.
    model(items[3], [l4, h4], "a_much_better", False)
    model(items[3], [h4, l4], "b_much_better", True)
    model(items[4], [l5, h5], "b_better", False)
    model(items[4], [h5, l5], "a_better", True)
    return batch, run, items


def section_of(batch, **settings) -> dict:
    (section,) = judge_sections(batch, seed=0, resamples=2000, **settings)
    return section


def figures(rows) -> dict:
    return {
        row["figure"]: (row["value"], row["low"], row["high"], row["judgements"], row["questions"])
        for row in rows
    }


def test_the_verdicts_of_the_run_by_hand(judged):
    _, run, items = judged
    found = run_verdicts(run)
    assert [found[item.pk].consistent for item in items] == [True, True, False, True, True]
    assert [found[item.pk].preference for item in items] == [0.5, 0.75, None, 1.0, -0.5]
    assert found[items[0].pk].confidence == pytest.approx(0.8)


def test_the_judge_and_the_labelers_side_by_side_on_the_same_items(judged):
    batch, _, _ = judged
    section = section_of(batch)
    # Labelers judged items 1-4; the judge's verdict counts on 1, 2 and 4 (3 flipped): those are compared.
    assert section["counts"] == {
        "judged": 5,
        "both_orders": 5,
        "consistent": 4,
        "flipped": 1,
        "human_items": 4,
        "compared": 3,
    }
    assert section["run"] == {
        "id": section["run"]["id"],
        "judge": JUDGE_NAME,
        "prompt_version": "v1",
        "status": "queued",
        "route": False,
        "holding": False,
    }
    # The judge with the majority: item 1 (+,+,- -> +) 1; item 2 (equal, -) none; item 4 (+) 1. Two
    # questions, each all agreement: [1, 1].
    # Each labeler with the majority of the others: item 1 only dave has one (+,+): 0; item 2 bob against
    # carol's -: 0.5, carol against bob's equal: 0.5; item 4 bob alone. q1 {0} and q2 {0.5, 0.5}: 1/3, the
    # bootstrap's extremes q1 twice (0) and q2 twice (0.5), each a quarter of the draws.
    # Pairs of labelers: item 1 (1, 0, 0), item 2 (0.5): 1.5 / 4; q1 alone 1/3, q2 alone 0.5.
    # The judge with each labeler: item 1 (1, 1, 0), item 2 (0.5, 0), item 4 (1): 3.5 / 6. Three questions:
    # all q2 (0.25) and all q3 (1) each come up in 1/27 of the draws, more than the 2.5% tails.
    assert figures(section["agreement"]) == {
        "labelers_majority": (pytest.approx(1 / 3), 0.0, 0.5, 3, 2),
        "judge_majority": (1.0, 1.0, 1.0, 2, 2),
        "labelers_pairs": (0.375, pytest.approx(1 / 3), 0.5, 4, 2),
        "judge_pairs": (pytest.approx(7 / 12), 0.25, 1.0, 6, 3),
    }
    assert section["agreement"][1]["label"] == f"{JUDGE_NAME}, with the labelers' majority"


def test_each_labeler_with_the_others_and_with_the_judge(judged):
    batch, _, items = judged
    rows = {row["labeler"]: row for row in section_of(batch)["labelers"]}
    assert list(rows) == ["bob", "carol", "dave"]  # eve's and frank's work does not count

    # bob: with the others, item 1 mean(1, 0) and item 2 0.5 -> 0.5; with the judge, items 1, 2, 4: 1, 0.5, 1.
    # carol: others item 1 mean(1, 0), item 2 0.5 -> 0.5; judge item 1: 1, item 2: 0 -> 0.5 over q1 and q2.
    # dave: item 1 only: 0 with both.
    def row(name):
        r = rows[name]
        return (
            r["others_value"],
            r["others_judgements"],
            r["judge_value"],
            r["judge_low"],
            r["judge_high"],
            r["judge_judgements"],
        )

    assert row("bob") == (0.5, 2, pytest.approx(5 / 6), 0.5, 1.0, 3)
    assert row("carol") == (0.5, 2, 0.5, 0.0, 1.0, 2)
    assert row("dave") == (0.0, 1, 0.0, 0.0, 0.0, 1)
    # The labelers' figure is the per-labeler agreement of feedback.agreement on the same items.
    labels = {
        str(items[0].pk): {"bob": 0.5, "carol": 0.5, "dave": -0.5},
        str(items[1].pk): {"bob": 0.0, "carol": -0.5},
        str(items[3].pk): {"bob": 1.0},
    }
    assert comparison_agreement(labels) == {"bob": 0.5, "carol": 0.5, "dave": 0.0}


def test_position_bias_by_hand(judged):
    batch, _, _ = judged
    # Flips: item 3 of the five read in both orders (q1 0/1, q2 0/2, q3 1/2; all q3 is 1/27 of the draws).
    # Slot A in the first order: items 1, 2, 4 (1 each), 3 and 5 (0): 3/5; reversed: only item 5: 1/5.
    assert figures(section_of(batch)["position_bias"]) == {
        "flips": (0.2, 0.0, 0.5, 5, 3),
        "slot_a_first": (0.6, 0.5, 1.0, 5, 3),
        "slot_a_reversed": (0.2, 0.0, 0.5, 5, 3),
    }


def test_a_confusion_table_per_dimension_counts_each_order_once(judged):
    batch, _, _ = judged
    tables = {table["measure"]: table for table in section_of(batch)["confusion"]}
    assert list(tables) == ["overall", "accuracy", "coherence"]
    assert [c["key"] for c in tables["overall"]["columns"]] == [
        "a_much_better",
        "a_better",
        "equal",
        "b_better",
        "b_much_better",
        "none",
    ]

    # Labelers' majority (side A = the lower id): item 1 A better (2 of 3), item 2 none, item 3 B better,
    # item 4 A much better. The judge, seen from side A: item 1 A better twice; item 2 A much better, then A
    # better; item 3 A better, then B better; item 4 A much better twice (item 5: no labeler).
    def counts(table):
        return [
            {k: v for k, v in row.items() if v and k != "total"} | {"total": row["total"]}
            for row in table["rows"]
        ]

    assert counts(tables["overall"]) == [
        {"judge": "A much better", "a_much_better": 2, "none": 1, "total": 3},
        {"judge": "A better", "a_better": 2, "b_better": 1, "none": 1, "total": 4},
        {"judge": "Equally good", "total": 0},
        {"judge": "B better", "b_better": 1, "total": 1},
        {"judge": "B much better", "total": 0},
    ]
    # Accuracy: only the judge rated it (item 1, equal twice): no majority.
    assert counts(tables["accuracy"])[2] == {"judge": "Equally good", "none": 2, "total": 2}


def test_the_other_figures_stay_the_labelers_alone(judged):
    batch, run, _ = judged
    with_judge = batch_results(batch)
    run.delete()
    without = batch_results(batch)
    assert without["judges"] == [] and len(with_judge["judges"]) == 1
    assert {k: v for k, v in with_judge.items() if k != "judges"} == {
        k: v for k, v in without.items() if k != "judges"
    }


def test_the_results_page_shows_the_judge_escaped_and_its_tables_download(client_for, alice, judged):
    batch, run, _ = judged
    client = client_for(alice)
    html = client.get(results_url(batch)).content.decode()
    assert "Judges beside the labelers" in html and JUDGE_NAME not in html and escape(JUDGE_NAME) in html
    assert "0.583" in html and "0.250" in html  # the judge with each labeler, and its interval's low end
    url = reverse("console:feedback_results_csv", args=[batch.pk, f"judge-{run.pk}-agreement"])
    assert url in html
    rows = csv_rows(client.get(url))
    assert rows[0] == ["Figure", "Value", "95% CI low", "95% CI high", "Judgements", "Questions"]
    assert rows[4][0] == f"{JUDGE_NAME} with each labeler (every pair on an item)"
    assert float(rows[4][1]) == pytest.approx(7 / 12) and rows[4][4:] == ["6", "3"]
    confusion = csv_rows(
        client.get(
            reverse("console:feedback_results_csv", args=[batch.pk, f"judge-{run.pk}-confusion-overall"])
        )
    )
    assert confusion[0][0] == f"{JUDGE_NAME} says" and confusion[2] == [
        "A better",
        "0",
        "2",
        "0",
        "1",
        "0",
        "1",
        "4",
    ]
    api = client.get(reverse("api-batch-results", args=[batch.pk])).json()
    assert api == batch_results(batch) and api["judges"][0]["agreement"][3]["value"] == pytest.approx(7 / 12)


def test_a_batch_without_judge_runs_has_no_judge_section(client_for, alice, bob):
    batch = FeedbackBatch.objects.create(name="plain", template="minimal_comparison")
    assert batch_results(batch)["judges"] == []
    assert "Judges beside the labelers" not in client_for(alice).get(results_url(batch)).content.decode()


def run_on(batch) -> JudgeRun:
    return JudgeRun.objects.create(batch=batch, judge_kind=JudgeKind.ENDPOINT, judge_name="judge")


def test_rankings_are_scored_pair_by_pair_and_have_no_confusion_table(bob, django_user_model):
    carol = make_user(django_user_model, "carol", "labeler")
    batch = FeedbackBatch.objects.create(name="ranked", template="ranking")
    answers = answers_to(ask("Rank these?"), 4)
    item = item_of(batch, answers)
    in_order = {"ranks": {"1": 1, "2": 2, "3": 3, "4": 4}}
    judge(item, bob, answers, in_order)  # a, b, c, d
    judge(item, carol, answers[::-1], in_order)  # d, c, b, a: every pair the other way round
    run = run_on(batch)
    ModelJudgement.objects.create(run=run, item=item, order=[a.pk for a in answers], response=in_order)
    reverse_ranks = {"ranks": {"1": 4, "2": 3, "3": 2, "4": 1}}
    ModelJudgement.objects.create(
        run=run, item=item, swapped=True, order=[a.pk for a in answers[::-1]], response=reverse_ranks
    )
    section = section_of(batch)
    # The judge orders a, b, c, d in both orders. No pair has a majority (bob and carol disagree on each);
    # the judge agrees with bob on all 6 pairs and with carol on none; bob and carol: 0.
    assert figures(section["agreement"]) == {
        "labelers_majority": (0.0, 0.0, 0.0, 2, 1),
        "judge_majority": (None, None, None, 0, 0),
        "labelers_pairs": (0.0, 0.0, 0.0, 1, 1),
        "judge_pairs": (0.5, 0.5, 0.5, 2, 1),
    }
    assert [row["figure"] for row in section["position_bias"]] == ["flips"] and section["confusion"] == []


def test_ratings_are_scored_field_by_field_with_a_table_per_field(bob, django_user_model):
    carol = make_user(django_user_model, "carol", "labeler")
    batch = FeedbackBatch.objects.create(name="rated", template="rating", preset="truthfulqa")
    (answer,) = answers_to(ask("Is it true?"), 1)
    item = item_of(batch, [answer])
    for person in (bob, carol):
        judge(item, person, [answer], {"truthful": "yes", "informative": "no"})
    run = run_on(batch)
    for swapped in (False, True):
        response = {"truthful": "yes", "informative": "yes"}
        ModelJudgement.objects.create(
            run=run, item=item, swapped=swapped, order=[answer.pk], response=response
        )
    section = section_of(batch)
    # Truthful: yes against the majority's yes; informative: yes against no. Half.
    assert figures(section["agreement"])["judge_majority"] == (0.5, 0.5, 0.5, 1, 1)
    truthful, informative = section["confusion"]
    assert truthful["rows"][0] == {"judge": "Yes", "yes": 2, "no": 0, "none": 0, "total": 2}
    assert informative["rows"][0] == {"judge": "Yes", "yes": 0, "no": 2, "none": 0, "total": 2}


def test_the_human_headline_reads_the_same_judgements_as_the_judges_figures(judged, bob):
    """Flag-review exclusions, late work and work a revocation took out are in no figure: the headline's
    judgements are the labelers' the judge is compared with (frank's came before his revocation)."""
    batch, _, _ = judged
    kept = {(s.labeler, s.item) for s in submissions(batch)}
    names = dict(get_user_model().objects.values_list("id", "username"))
    assert sorted(names[labeler] for labeler, _ in kept) == ["bob"] * 4 + ["carol"] * 3 + ["dave"]
