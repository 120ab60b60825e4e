"""A batch's results against hand-computed values: the preference for side A (ties half, the shown order
turned to the sides, gold/late/skipped work left out, a question weighing by its judgements), its bootstrap
interval by question (exact where two questions make it so; reproducible with a seed), each dimension,
the rating presets' rates and GopherCite's selective-prediction curve, agreement; then the page (labels
escaped, bad parameters a 400), its CSVs, the API and who may see them."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from annotation.feedback.answers_import import answer_from_episode
from annotation.feedback.result_stats import bootstrap_interval, estimate, judgement_score, selective_curve
from annotation.feedback.results import DEFAULT_SIDES, batch_results, headline
from annotation.feedback.stats import labeler_stats
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeKind,
    EpisodeStatus,
    FeedbackBatch,
    FeedbackItem,
    Question,
    Split,
)
from tests.conftest import make_user
from training.models import Sample, SamplingRun

pytestmark = pytest.mark.django_db
NASTY = '<script>alert("x")</script>'


# Plain values ----------------------------------------------------------------------------------------------


def test_a_judgement_scores_a_win_one_a_tie_half_and_a_loss_nothing():
    assert [judgement_score(v) for v in (1.0, 0.5, 0.0, -0.5, -1.0)] == [1.0, 1.0, 0.5, 0.0, 0.0]


def test_with_two_questions_the_interval_is_their_two_rates():
    # Resampling 2 questions gives {q1, q1} (rate 1), {q1, q2} (3/4: q1 weighs by its 3 judgements) or
    # {q2, q2} (rate 0), the extremes each a quarter of the draws: the 2.5% and 97.5% points are 0 and 1.
    figure = estimate([(1, 1.0), (1, 1.0), (1, 1.0), (2, 0.0)])
    assert figure == {"value": 0.75, "low": 0.0, "high": 1.0, "judgements": 4, "questions": 2}
    # One question: every resample is that question.
    assert estimate([(7, 1.0), (7, 0.5)]) == {
        "value": 0.75,
        "low": 0.75,
        "high": 0.75,
        "judgements": 2,
        "questions": 1,
    }
    assert estimate([]) == {"value": None, "low": None, "high": None, "judgements": 0, "questions": 0}


def test_the_bootstrap_resamples_questions_not_judgements():
    # 10 questions, each all wins or all losses: resampling judgements would give a narrow interval
    # around 0.5; resampling questions keeps a question's 20 judgements together, so it is wide.
    judgements = [(q, float(q % 2)) for q in range(10) for _ in range(20)]
    low, high = estimate(judgements)["low"], estimate(judgements)["high"]
    assert low <= 0.25 and high >= 0.75
    # The ratio is over judgements: a resample of questions with more judgements moves it more.
    assert bootstrap_interval([3.0, 0.0], [3, 1], resamples=500) == (0.0, 1.0)


def test_the_bootstrap_is_reproducible_with_a_seed_and_differs_with_another():
    judgements = [(q, s) for q, s in enumerate([1, 0, 1, 1, 0.5, 0, 1, 1, 0, 1, 0.5, 1])]
    first = estimate(judgements, seed=0)
    assert estimate(judgements, seed=0) == first
    other = estimate(judgements, seed=1)
    assert other["value"] == first["value"] == pytest.approx(8 / 12)
    assert (other["low"], other["high"]) != (first["low"], first["high"])
    assert estimate(judgements, seed=0, resamples=500) != first  # another number of draws, another interval


def test_the_selective_curve_by_hand():
    # question: (score of its answer, S&P judgements)
    questions = {1: (0.9, [1.0, 0.0]), 2: (0.5, [1.0]), 3: (0.1, [0.0]), 4: (-0.3, [0.0]), 5: (0.1, [1.0])}
    assert selective_curve(questions) == [
        {"threshold": -0.3, "coverage": 1.0, "answered": 5, "rate": 3 / 6, "judgements": 6},
        {"threshold": 0.1, "coverage": 0.8, "answered": 4, "rate": 3 / 5, "judgements": 5},
        {"threshold": 0.5, "coverage": 0.4, "answered": 2, "rate": 2 / 3, "judgements": 3},
        {"threshold": 0.9, "coverage": 0.2, "answered": 1, "rate": 1 / 2, "judgements": 2},
    ]


# Batches in the database -----------------------------------------------------------------------------------


def ask(text: str) -> Question:
    return Question.objects.create(text=text, key=text[:64], dataset="demo", split=Split.EVAL)


def answers_to(question: Question, count: int) -> list[Answer]:
    return [
        Answer.objects.create(
            question=question, text=f"answer {i}", source_kind="model", source={"model": "m"}
        )
        for i in range(count)
    ]


def item_of(
    batch: FeedbackBatch, answers: list[Answer], sides: dict | None = None, gold=False
) -> FeedbackItem:
    item = FeedbackItem.objects.create(
        batch=batch, question=answers[0].question, sides=sides or {}, is_gold=gold
    )
    item.answers.set(answers)
    return item


def judge(
    item, labeler, shown: list[Answer], response: dict, status=AssignmentStatus.SUBMITTED
) -> Assignment:
    """A labeler's work as the task page stores it: ``shown`` is the order the page drew (slot A first)."""
    now = timezone.now()
    return Assignment.objects.create(
        item=item,
        labeler=labeler,
        order=[answer.pk for answer in shown],
        status=status,
        response=response,
        leased_until=now + timedelta(hours=1),
        submitted_at=now,
    )


def ratings(**codes) -> dict:
    return {"ratings": codes, "comment": ""}


@pytest.fixture
def labelers(bob, django_user_model):
    return [bob, *(make_user(django_user_model, name, "labeler") for name in ("carol", "dave", "@eve"))]


@pytest.fixture
def comparison(labelers):
    """Two questions. On q1 side A is the answer with the HIGHER id (``sides``), shown first to bob and
    second to carol and dave; on q2 side A is the lower id, shown second. Plus work that must not count."""
    bob, carol, dave, eve = labelers
    batch = FeedbackBatch.objects.create(
        name="run vs humans",
        template="webgpt_comparison",
        origin={"source": "runs", "pairing": "vs_demonstrations", "sides": {"A": NASTY, "B": "humans"}},
    )
    q1, q2 = ask("Why is the sky blue?"), ask("Who won the 2022 AFL Grand Final?")
    low1, high1 = answers_to(q1, 2)
    low2, high2 = answers_to(q2, 2)
    first = item_of(batch, [low1, high1], {str(high1.pk): "A", str(low1.pk): "B"})
    second = item_of(batch, [low2, high2], {str(low2.pk): "A", str(high2.pk): "B"})
    # q1: bob sees side A as A and rates it better: 1. carol and dave see side B as A and rate it (much)
    # better: 0 each.
    judge(first, bob, [high1, low1], ratings(overall="a_better", coherence="b_much_better"))
    judge(first, carol, [low1, high1], ratings(overall="a_much_better"))
    judge(first, dave, [low1, high1], ratings(overall="a_better", coherence="equal"))
    # q2: equal, whatever the order: 0.5.
    judge(second, bob, [high2, low2], ratings(overall="equal", coherence="b_better"))
    # Left out: a skipped task, a late one, and a gold item (gold measures labelers).
    judge(second, carol, [low2, high2], {}, status=AssignmentStatus.SKIPPED)
    judge(second, dave, [low2, high2], ratings(overall="b_much_better"), status=AssignmentStatus.LATE)
    gold = item_of(batch, answers_to(q2, 2), gold=True)
    judge(gold, bob, list(gold.answers.order_by("id")), ratings(overall="a_much_better"))
    judge(gold, eve, list(gold.answers.order_by("id")), ratings(overall="a_better"))
    return batch


def test_the_preference_for_side_a_turns_each_shown_order_to_the_sides(comparison):
    results = batch_results(comparison)
    overall = results["preference"][0]
    assert overall["dimension"] == "overall"
    # Judgements (q1: 1, 0, 0; q2: 0.5) pooled: 1.5 / 4, not the mean of question means (1/3 + 1/2) / 2.
    # Read without the shown order it would be 1, 1, 1; with the lower id as side A 0, 1, 1.
    assert overall["value"] == pytest.approx(0.375)
    assert (overall["judgements"], overall["questions"]) == (4, 2)
    # Two questions: the interval is the rates of q1 alone and q2 alone.
    assert (overall["low"], overall["high"]) == (pytest.approx(1 / 3), pytest.approx(0.5))
    assert results["sides"] == {"A": NASTY, "B": "humans"} and results["pairing"] == "vs_demonstrations"
    assert results["counts"] == {
        "items": 3,
        "submitted": 6,
        "gold_left_out": 2,
        "questions": 2,
        "labelers": 4,
    }


def test_each_dimension_has_its_own_figure_and_an_unrated_one_says_so(comparison):
    by_code = {row["dimension"]: row for row in batch_results(comparison)["preference"]}
    assert next(iter(by_code)) == "overall" and len(by_code) == 6
    # coherence: bob on q1 rated the shown B (side B) much better: 0; dave equal: 0.5; bob on q2 rated the
    # shown B (side A, the lower id) better: 1.
    coherence = by_code["coherence"]
    assert coherence["value"] == pytest.approx(1.5 / 3)
    assert (coherence["low"], coherence["high"]) == (pytest.approx(0.25), pytest.approx(1.0))
    assert (coherence["judgements"], coherence["questions"]) == (3, 2)
    assert by_code["unsupported"] == {
        "dimension": "unsupported",
        "label": "Unsupported information",
        "value": None,
        "low": None,
        "high": None,
        "judgements": 0,
        "questions": 0,
    }


def test_without_sides_side_a_is_the_lower_answer_id(labelers):
    bob, carol, *_ = labelers
    batch = FeedbackBatch.objects.create(name="old", template="minimal_comparison")
    low, high = answers_to(ask("Is it old?"), 2)
    item = item_of(batch, [low, high])
    judge(item, bob, [high, low], ratings(overall="a_better"))  # the higher id preferred: 0
    judge(item, carol, [low, high], ratings(overall="a_better", accuracy="equal"))  # the lower id: 1
    results = batch_results(batch)
    assert results["sides"] == DEFAULT_SIDES
    assert [row["dimension"] for row in results["preference"]] == ["overall", "accuracy", "coherence"]
    assert results["preference"][0]["value"] == 0.5 and results["preference"][1]["value"] == 0.5
    assert headline(batch)["label"] == (
        "Preference for A (the answer with the lower id) over B (the answer with the higher id)"
    )


def test_agreement_pairs_every_two_labelers_on_an_item_and_reuses_the_per_labeler_figures(comparison):
    results = batch_results(comparison)
    # q1 item: bob prefers the higher id, carol and dave the lower: pairs 0, 0, 1. The gold item (q2):
    # bob and eve both prefer the shown A: 1. The q2 item has one submission: no pair.
    agreement = results["agreement"]
    assert agreement["value"] == pytest.approx(2 / 4)
    assert (agreement["pairs"], agreement["items"], agreement["questions"]) == (4, 2, 2)
    assert results["labelers"] == labeler_stats(comparison)
    assert {row["labeler"]: row["agreement"] for row in results["labelers"]}["bob"] == pytest.approx(
        (0 + 1) / 2
    )


def test_rankings_have_agreement_and_counts_but_no_preference(labelers):
    bob, carol, *_ = labelers
    batch = FeedbackBatch.objects.create(name="rank", template="ranking")
    group = answers_to(ask("Rank these"), 4)
    item = item_of(batch, group)
    judge(item, bob, group, {"ranks": {"1": 1, "2": 2, "3": 3, "4": 4}})
    # carol saw them reversed and ranked them the same way as bob, but for the last two, swapped.
    judge(item, carol, group[::-1], {"ranks": {"1": 3, "2": 4, "3": 2, "4": 1}})
    results = batch_results(batch)
    assert results["preference"] == [] and results["rates"] == [] and headline(batch) is None
    # Of the 6 answer pairs, only (3rd, 4th) is ordered differently.
    assert results["agreement"]["value"] == pytest.approx(5 / 6)
    assert (results["agreement"]["pairs"], results["counts"]["submitted"]) == (1, 2)


def sampled(run: SamplingRun, question: Question, index: int, score: float | None, declined: bool) -> Answer:
    """A sample of ``run`` as the sampling job stores it, and its Answer as batches make it."""
    episode = Episode.objects.create(
        kind=EpisodeKind.MODEL,
        policy=run.policy_name,
        question=question,
        status=EpisodeStatus.FINISHED,
        corpus="freshwiki",
        settings={},
        state={"quotes": []},
        answer=f"sample {index} for {question.text}",
    )
    Sample.objects.create(
        run=run, episode=episode, question=question, index=index, score=score, declined=declined
    )
    return answer_from_episode(episode)


def sp(plausible: str, supported: str) -> dict:
    return {"plausible": plausible, "supported": supported, "justification": "because the quote says so here"}


@pytest.fixture
def gophercite(labelers, alice):
    """Four questions sampled by a run, the last one declined (best score under the threshold), each
    rated answer in its own item; q2 also has a lower-scored sample rated."""
    bob, carol, *_ = labelers
    run = SamplingRun.objects.create(owner=alice, policy_name="tiny", n=2, settings={"decline_threshold": 0})
    batch = FeedbackBatch.objects.create(name="sp", template="rating", preset="gophercite")
    questions = [ask(f"Question {i}") for i in range(4)]
    plan = [  # (question, index, score, declined, [(labeler, plausible, supported)])
        (0, 0, 0.9, False, [(bob, "yes", "yes"), (carol, "yes", "unsure")]),
        (1, 0, 0.5, False, [(bob, "yes", "yes")]),
        (1, 1, 0.2, False, [(carol, "no", "no")]),
        (2, 0, 0.1, False, [(bob, "no", "yes")]),
        (3, 0, -0.3, True, [(bob, "yes", "no")]),
    ]
    for question, index, score, declined, work in plan:
        answer = sampled(run, questions[question], index, score, declined)
        item = item_of(batch, [answer])
        for labeler, plausible, supported in work:
            judge(item, labeler, [answer], sp(plausible, supported))
    return batch


def test_gophercite_rates_count_unsure_as_not(gophercite):
    rates = {row["rate"]: row for row in batch_results(gophercite)["rates"]}
    assert list(rates) == ["plausible", "supported", "supported_plausible"]
    # Six judgements over four questions; plausible yes 4, supported yes 3 (one unsure), both 2.
    assert rates["plausible"]["value"] == pytest.approx(4 / 6)
    assert rates["supported"]["value"] == pytest.approx(3 / 6)
    assert rates["supported_plausible"]["value"] == pytest.approx(2 / 6)
    assert all((row["judgements"], row["questions"]) == (6, 4) for row in rates.values())
    assert headline(gophercite) == {"kind": "rate:supported_plausible", "label": "S&P rate", **{
        key: rates["supported_plausible"][key] for key in ("value", "low", "high", "judgements", "questions")
    }}  # fmt: skip


def test_the_selective_prediction_curve_of_a_batch_that_covers_declined_answers(gophercite):
    prediction = batch_results(gophercite)["selective_prediction"]
    assert prediction["rate"] == "supported_plausible" and len(prediction["curves"]) == 1
    curve = prediction["curves"][0]
    # Each question stands for its best-scored rated answer (q2: the 0.5 sample, not the 0.2 one):
    # q1 0.9 [1, 0], q2 0.5 [1], q3 0.1 [0], q4 -0.3 [0].
    assert curve["label"] == f"run {curve['run']}" and curve["questions"] == 4
    assert curve["points"] == [
        {"threshold": -0.3, "coverage": 1.0, "answered": 4, "rate": pytest.approx(2 / 5), "judgements": 5},
        {"threshold": 0.1, "coverage": 0.75, "answered": 3, "rate": pytest.approx(2 / 4), "judgements": 4},
        {"threshold": 0.5, "coverage": 0.5, "answered": 2, "rate": pytest.approx(2 / 3), "judgements": 3},
        {"threshold": 0.9, "coverage": 0.25, "answered": 1, "rate": pytest.approx(1 / 2), "judgements": 2},
    ]


def test_two_runs_in_one_rating_batch_get_a_curve_each(gophercite, alice, bob):
    # Another run's scores come from another reward model: its answers are never pooled with the first's.
    other = SamplingRun.objects.create(owner=alice, policy_name="tiny-2", n=1)
    question = Question.objects.get(text="Question 0")
    answer = sampled(other, question, 0, 5.0, declined=False)
    judge(item_of(gophercite, [answer]), bob, [answer], sp("no", "no"))
    FeedbackBatch.objects.filter(pk=gophercite.pk).update(origin={"run_labels": {str(other.pk): "run B"}})
    gophercite.refresh_from_db()
    first, second = batch_results(gophercite)["selective_prediction"]["curves"]
    assert first["questions"] == 4 and first["points"][0]["rate"] == pytest.approx(2 / 5)
    assert second == {
        "run": other.pk,
        "label": "run B",
        "questions": 1,
        "points": [{"threshold": 5.0, "coverage": 1.0, "answered": 1, "rate": 0.0, "judgements": 1}],
    }


def test_no_curve_without_declined_answers_unless_the_origin_says_they_are_included(gophercite):
    Sample.objects.update(declined=False)
    assert batch_results(gophercite)["selective_prediction"] is None
    FeedbackBatch.objects.filter(pk=gophercite.pk).update(origin={"source": "runs", "include_declined": True})
    gophercite.refresh_from_db()
    assert batch_results(gophercite)["selective_prediction"]["curves"][0]["questions"] == 4


def test_truthfulqa_rates(labelers):
    bob, carol, *_ = labelers
    batch = FeedbackBatch.objects.create(name="tqa", template="rating", preset="truthfulqa")
    first, second = ask("Can pigs fly?"), ask("Is the moon cheese?")
    a, b = answers_to(first, 1)[0], answers_to(second, 1)[0]
    judge(item_of(batch, [a]), bob, [a], {"truthful": "yes", "informative": "yes"})
    judge(item_of(batch, [a]), carol, [a], {"truthful": "yes", "informative": "no"})
    judge(item_of(batch, [b]), bob, [b], {"truthful": "no"})  # informative unanswered: not in that rate
    rates = {row["rate"]: row for row in batch_results(batch)["rates"]}
    assert (rates["truthful"]["value"], rates["truthful"]["judgements"]) == (pytest.approx(2 / 3), 3)
    assert (rates["informative"]["value"], rates["informative"]["judgements"]) == (0.5, 2)
    assert rates["truthful_informative"]["value"] == 0.5
    assert rates["truthful_informative"]["questions"] == 1
    assert batch_results(batch)["selective_prediction"] is None  # not samples
    assert headline(batch)["label"] == "Truthful and informative rate"


def test_the_headline_before_any_judgement(alice):
    batch = FeedbackBatch.objects.create(
        name="new",
        template="webgpt_comparison",
        origin={"pairing": "runs", "sides": {"A": "run 3", "B": "run 4"}},
    )
    assert headline(batch) == {
        "kind": "preference:runs",
        "label": "Preference for A (run 3) over B (run 4)",
        "value": None,
        "low": None,
        "high": None,
        "judgements": 0,
        "questions": 0,
    }


# The page, the CSVs, the API -----------------------------------------------------------------------------


def results_url(batch, **query) -> str:
    url = reverse("console:feedback_results", args=[batch.pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_the_page_shows_every_figure_with_its_interval_and_escapes_labels(client_for, alice, comparison):
    page = client_for(alice).get(results_url(comparison))
    assert page.status_code == 200
    html = page.content.decode()
    assert NASTY not in html and escape(NASTY) in html  # in the facts, the table title and the SVG
    assert html.count(escape(NASTY)) >= 3
    assert "<svg" in html and "style=" not in html and "<script>" not in html.split("</head>")[1]
    assert "0.375" in html and "0.333" in html and "0.500" in html  # value and interval, beside the plot
    assert "no judgements" in html  # unsupported information
    assert "0.5: no preference" in html
    for table in ("preference", "agreement", "labelers"):
        assert reverse("console:feedback_results_csv", args=[comparison.pk, table]) in html
    detail = client_for(alice).get(reverse("console:feedback_batch", args=[comparison.pk])).content.decode()
    assert results_url(comparison) in detail


def test_the_page_of_a_rating_batch_draws_the_selective_prediction_curve(client_for, alice, gophercite):
    client = client_for(alice)
    html = client.get(results_url(gophercite)).content.decode()
    assert (
        "Selective prediction" in html and html.count("<svg") == 1 and "S&amp;P rate of the answered" in html
    )
    url = reverse("console:feedback_results_csv", args=[gophercite.pk, "selective_prediction"])
    assert url in html
    rows = csv_rows(client.get(url))
    assert rows[0] == [
        "Run",
        "Reward threshold",
        "Coverage",
        "Questions answered",
        "Supported and plausible (S&P) rate",
        "Judgements",
    ]
    run = Sample.objects.first().run_id
    # A negative threshold is a number, not text a spreadsheet would run: no apostrophe.
    assert rows[1] == [f"run {run}", "-0.3", "1.0", "4", "0.4", "5"] and len(rows) == 5
    rates = csv_rows(client.get(reverse("console:feedback_results_csv", args=[gophercite.pk, "rates"])))
    assert [row[0] for row in rates[1:]] == ["Plausible", "Supported", "Supported and plausible (S&P)"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"seed": "abc"}, "seed"),
        ({"seed": "-1"}, "seed"),
        ({"seed": "4294967296"}, "seed"),
        ({"seed": "٣"}, "seed"),
        ({"resamples": "5"}, "resamples"),
        ({"resamples": "9" * 30}, "resamples"),
        ({"resamples": "1e3"}, "resamples"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(client_for, alice, comparison, query, field):
    client = client_for(alice)
    page = client.get(reverse("console:feedback_results", args=[comparison.pk]), query)
    assert page.status_code == 400 and f"&#x27;{field}&#x27; must be a whole number" in page.content.decode()
    table = client.get(reverse("console:feedback_results_csv", args=[comparison.pk, "preference"]), query)
    assert table.status_code == 400 and f"'{field}' must be a whole number" in table.content.decode()
    api = client.get(reverse("api-batch-results", args=[comparison.pk]), query)
    assert api.status_code == 400 and field in api.json()


def test_the_seed_and_resamples_change_the_intervals_and_stay_on_the_links(client_for, alice, comparison):
    client = client_for(alice)
    page = client.get(results_url(comparison, seed=7, resamples=300))
    assert page.status_code == 200 and page.context["results"]["seed"] == 7
    assert page.context["results"]["resamples"] == 300
    link = (
        reverse("console:feedback_results_csv", args=[comparison.pk, "preference"])
        + "?seed=7&amp;resamples=300"
    )
    assert link in page.content.decode()


def test_each_table_downloads_as_csv(client_for, alice, comparison):
    client = client_for(alice)
    response = client.get(reverse("console:feedback_results_csv", args=[comparison.pk, "preference"]))
    assert response.status_code == 200 and response["Content-Type"] == "text/csv; charset=utf-8"
    assert f'filename="batch-{comparison.pk}-preference.csv"' in response["Content-Disposition"]
    rows = csv_rows(response)
    assert rows[0] == ["Dimension", "Value", "95% CI low", "95% CI high", "Judgements", "Questions"]
    assert rows[1][0] == "Overall usefulness" and float(rows[1][1]) == 0.375 and rows[1][4:] == ["4", "2"]
    assert float(rows[1][2]) == pytest.approx(1 / 3)  # unrounded
    assert ["Unsupported information", "", "", "", "0", "0"] in rows
    labelers = csv_rows(client.get(reverse("console:feedback_results_csv", args=[comparison.pk, "labelers"])))
    # A username a spreadsheet would run as a formula is written as text.
    assert [row[0] for row in labelers[1:]] == ["'@eve", "bob", "carol", "dave"]
    missing = client.get(reverse("console:feedback_results_csv", args=[comparison.pk, "rates"]))
    assert missing.status_code == 400
    assert missing.content.decode() == (
        "This batch has no table 'rates'; its tables are preference, agreement, labelers, overlap."
    )


def test_the_api_returns_the_same_figures(client_for, alice, comparison):
    response = client_for(alice).get(reverse("api-batch-results", args=[comparison.pk]), {"seed": "3"})
    assert response.status_code == 200
    assert response.json() == batch_results(comparison, seed=3)
    assert response.json()["preference"][0]["value"] == 0.375


def test_only_researchers_reach_results(client_for, alice, bob, dana, charlie, comparison):
    pages = [
        reverse("console:feedback_results", args=[comparison.pk]),
        reverse("console:feedback_results_csv", args=[comparison.pk, "preference"]),
    ]
    api = reverse("api-batch-results", args=[comparison.pk])
    for user in (bob, dana, charlie):  # a labeler, a demonstrator, an outsider
        client = client_for(user)
        assert [client.get(url).status_code for url in pages] == [403, 403]
        assert client.get(api).status_code == 404  # as api-batch: not theirs to see
    anonymous = client_for(None)
    for url in pages:
        response = anonymous.get(url)
        assert response.status_code == 302 and response.url.startswith(reverse("login"))
    assert anonymous.get(api).status_code == 401
    client = client_for(alice)
    missing = comparison.pk + 1000
    assert client.get(reverse("console:feedback_results", args=[missing])).status_code == 404
    assert (
        client.get(reverse("console:feedback_results_csv", args=[missing, "preference"])).status_code == 404
    )
    assert client.get(reverse("api-batch-results", args=[missing])).status_code == 404
