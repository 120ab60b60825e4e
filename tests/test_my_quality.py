"""Feedback to the people doing the work (issue 26): "My quality" (gold accuracy with its interval, per week,
agreement, each gold item judged differently shown in the labeler's own order next to the reference and
its explanation, screening scores, demonstration reviews), the researcher's gold page (explanations,
references entered on the normal task page) and reviews of demonstrations.

Bob labels; zelda labels the same items (her judgements and comment must never reach bob's page); alice
researches; dana demonstrates, erin too (she must not see dana's reviews)."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.feedback.answers_import import import_answers
from annotation.feedback.batches import BatchSettings, create_feedback_batch, group_answers
from annotation.models import (
    Assignment,
    AssignmentStatus,
    DemonstrationBatch,
    DemonstrationReview,
    Episode,
    EpisodeStatus,
    FeedbackItem,
)
from annotation.questions.service import import_questions
from annotation.workforce import quality
from annotation.workforce.states import State, set_state
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

SOURCES = ("secret-model-alpha", "secret-model-beta")
ZELDA_COMMENT = "ZELDA-PRIVATE-COMMENT"


@pytest.fixture
def zelda(django_user_model):
    return make_user(django_user_model, "zelda", "labeler")


@pytest.fixture
def erin(django_user_model):
    return make_user(django_user_model, "erin", "demonstrator")


def _answers(questions: int, prefix: str = "Q"):
    rows = [
        {
            "question": f"{prefix}{n}: why is the sky blue?",
            "answer": f"Answer {side} to question {n} [1].",
            "quotes": [
                {"title": f"Page {n}{side}", "url": "https://example.org/sky", "extract": "blue light"}
            ],
            "source": {"model": model},
        }
        for n in range(questions)
        for side, model in zip("xy", SOURCES, strict=True)
    ]
    texts = sorted({row["question"] for row in rows})
    import_questions("\n".join(json.dumps({"question": text}) for text in texts).encode(), filename="q.jsonl")
    return import_answers("\n".join(json.dumps(row) for row in rows).encode())


def _batch(alice, template="webgpt_comparison", *, screening=False, questions=4, prefix="Q"):
    groups = group_answers(_answers(questions, prefix), template)
    batch = create_feedback_batch(
        alice, BatchSettings(f"{template} {prefix}", template, required_probability=0.0), groups
    )
    if screening:
        batch.is_screening = True
        batch.save()
    return batch


def _judge(labeler, item, order, overall, *, comment="", at=None, flags=None):
    return Assignment.objects.create(
        item=item,
        labeler=labeler,
        order=order,
        status=AssignmentStatus.SUBMITTED,
        response={"ratings": {"overall": overall}, "flags": flags or {}, "comment": comment},
        submitted_at=at or timezone.now(),
        leased_until=timezone.now(),
    )


@pytest.fixture
def gold_world(alice, bob, zelda):
    """Four gold items; bob's judgements score 1, 0, 0.5 and 1 (the last three weeks ago is 1 of them);
    zelda shares two items with bob, agreeing on one (1) and saying "equal" on the other (0.5)."""
    batch = _batch(alice)
    batch.revision_seconds = 0  # every revision window is over: the references may be shown
    batch.save()
    items = list(batch.items.order_by("id"))
    orders = [sorted(item.answers.values_list("id", flat=True)) for item in items]  # [lower id, higher id]
    expected = [1.0, 1.0, 1.0, 0.5]  # the preference for the lower-id answer
    for item, preference in zip(items, expected, strict=True):
        item.is_gold, item.gold_expected = True, {"preference": preference, "flags": []}
        item.save()
    items[1].gold_explanation = "EXPLAIN-ONE: the lower answer cites its source correctly."
    items[1].save()
    low, high = orders[0]
    tasks = [
        # bob saw the higher id first (A) and preferred B, the lower id: agrees (1).
        _judge(bob, items[0], [high, low], "b_better"),
        # bob saw the higher id as A and preferred it: the reference prefers the lower id (B for him): 0.
        _judge(bob, items[1], list(reversed(orders[1])), "a_better"),
        # "equally good" against a preference: 0.5.
        _judge(bob, items[2], orders[2], "equal"),
        # the same answer preferred, weeks ago: 1.
        _judge(bob, items[3], orders[3], "a_much_better", at=timezone.now() - timedelta(days=21)),
    ]
    _judge(zelda, items[0], orders[0], "a_better", comment=ZELDA_COMMENT)  # lower id: as bob, 1
    _judge(zelda, items[1], orders[1], "equal", comment=ZELDA_COMMENT)  # bob: lower id -0.5; 0.5
    return batch, items, tasks


def test_gold_accuracy_and_agreement_against_hand_computed_figures(gold_world, bob):
    report = quality.report(bob)
    kind = next(k for k in report.kinds if k.kind == "webgpt_comparison")
    # (1 + 0 + 0.5 + 1) / 4, Wilson 95%: centre (p + z²/2n)/(1 + z²/n) ± ..., by hand 0.2194..0.9081.
    assert kind.gold.accuracy == 0.625 and kind.gold.count == 4
    assert kind.gold.low == pytest.approx(0.219427, abs=1e-5)
    assert kind.gold.high == pytest.approx(0.908101, abs=1e-5)
    # Weeks: three weeks ago one item (1.0); this week three (1 + 0 + 0.5) / 3.
    assert [(w.figure.accuracy, w.figure.count) for w in kind.gold_weeks] == [(1.0, 1), (0.5, 3)]
    # Agreement with zelda on the two shared items: (1 + 0.5) / 2, Wilson by hand 0.1979..0.9733.
    assert (kind.agreement.accuracy, kind.agreement.count) == (0.75, 2)
    assert kind.agreement.low == pytest.approx(0.197867, abs=1e-5)
    assert kind.agreement.high == pytest.approx(0.973323, abs=1e-5)
    assert kind.state == State.QUALIFIED


def test_the_page_shows_the_figures_and_each_disagreement_in_the_labelers_own_order(
    gold_world, client_for, bob
):
    _, items, tasks = gold_world
    page = client_for(bob).get(reverse("annotation:my_quality"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "n = 4" in html and "0.22\u20130.91" in html  # gold accuracy's count and interval
    assert "n = 2" in html and "0.20\u20130.97" in html  # agreement over the two shared items
    # Two disagreements (scores 0 and 0.5); the one scored 1 is not shown again.
    assert f'id="gold-{tasks[1].pk}"' in html and f'id="gold-{tasks[2].pk}"' in html
    assert f'id="gold-{tasks[0].pk}"' not in html and f'id="gold-{tasks[3].pk}"' not in html
    shown = re.search(rf'id="gold-{tasks[1].pk}".*?</article>', html, re.S).group(0)
    # Bob saw the higher id as A: his "A better" next to the reference in his order, "B much better".
    mine = shown[shown.index("Your judgement") : shown.index("Reference judgement")]
    reference = shown[shown.index("Reference judgement") : shown.index("Why")]
    assert "A better" in mine and "B much better" in reference
    assert "EXPLAIN-ONE" in shown
    # His order: the answer with the higher id is Answer A.
    higher = max(items[1].answers.all(), key=lambda a: a.pk)
    assert shown.index(higher.text.replace("[1].", "")) < shown.index("Answer B")
    equal = re.search(rf'id="gold-{tasks[2].pk}".*?</article>', html, re.S).group(0)
    assert "Equally good" in equal and "A much better" in equal and "not written an explanation" in equal
    # Nothing of zelda's, nor of where the answers came from.
    for secret in (ZELDA_COMMENT, "zelda", *SOURCES):
        assert secret not in html


def test_the_weekly_figures_are_drawn_as_a_chart_above_their_table(
    gold_world, client_for, bob, django_user_model
):
    kind = next(k for k in quality.report(bob).kinds if k.kind == "webgpt_comparison")
    then, now = (week.starts for week in kind.gold_weeks)
    html = client_for(bob).get(reverse("annotation:my_quality")).content.decode()
    over_time = html[html.index("<h2>Over time</h2>") : html.index("<h2>Gold items")]
    chart = re.search(r'<svg class="chart".*?</svg>', over_time, re.S).group(0)
    assert over_time.index("<svg") < over_time.index("<table>")  # the table keeps the numbers
    assert "WebGPT comparison: your gold accuracy and agreement per week" in chart
    # Gold accuracy three weeks ago 1 (one item), this week 0.5; agreement this week 0.75; each point its
    # interval bar, and each week labelled by its Monday.
    desc = re.search(r"<desc>(.*?)</desc>", chart).group(1)
    starts = [f"{day.day} {day:%b}" for day in (then, now)]
    assert desc == (
        f"gold accuracy: 1 at week starting {starts[0]} to 0.5 at week starting {starts[1]}; "
        f"agreement with other labelers: 0.75 at week starting {starts[1]}"
    )
    assert chart.count('<g class="interval"') == 2 and all(f">{label}</text>" in chart for label in starts)
    table = over_time[over_time.index("<table>") :]
    assert "n = 3" in table and "n = 2" in table  # this week's gold and agreement figures, with their counts
    # Nothing weekly yet: no chart, the page says so.
    newcomer = make_user(django_user_model, "newcomer", "labeler")
    empty = client_for(newcomer).get(reverse("annotation:my_quality")).content.decode()
    assert "No figures yet." in empty and "<svg" not in empty


def test_the_api_gives_the_same_figures_and_nothing_of_others(gold_world, client_for, bob):
    response = client_for(bob).get("/api/me/quality")
    assert response.status_code == 200
    data = response.json()
    kind = next(k for k in data["kinds"] if k["kind"] == "webgpt_comparison")
    assert kind["gold"] == {"accuracy": 0.625, "count": 4, "low": pytest.approx(0.219427, abs=1e-5),
                            "high": pytest.approx(0.908101, abs=1e-5)}  # fmt: skip
    assert kind["agreement"]["accuracy"] == 0.75 and kind["agreement"]["count"] == 2
    assert len(data["disagreements"]) == 2
    text = response.content.decode()
    for secret in (ZELDA_COMMENT, "zelda", *SOURCES):
        assert secret not in text


def test_a_paused_labeler_reads_why(gold_world, bob):
    reason = "Paused automatically: gold accuracy 40% over the last 10 gold items (95% interval 17%-69%)"
    set_state(bob, "webgpt_comparison", State.PAUSED, by=None, reason=reason)
    kind = next(k for k in quality.report(bob).kinds if k.kind == "webgpt_comparison")
    assert kind.state == State.PAUSED and kind.reason == reason


def test_screening_scores_only_the_labelers_own(alice, bob, zelda, client_for):
    batch = _batch(alice, screening=True, questions=2, prefix="S")
    first, second = batch.items.order_by("id")
    for item, preference in ((first, 1.0), (second, -1.0)):
        item.is_gold, item.gold_expected = True, {"preference": preference, "flags": []}
        item.save()
    for item in (first, second):
        _judge(bob, item, sorted(item.answers.values_list("id", flat=True)), "a_better")
        _judge(zelda, item, sorted(item.answers.values_list("id", flat=True)), "b_better")
    (test,) = quality.report(bob).screenings
    preference = test.scores[0]
    assert preference.measure == "preference"
    assert (preference.figure.accuracy, preference.figure.count) == (0.5, 2)  # (1 + 0) / 2
    assert test.judged == 2
    flags = test.scores[1]
    assert flags.measure == "flags" and flags.figure.accuracy == 1.0
    # Screening items are no gold checks: bob's production accuracy has no count.
    kind = next(k for k in quality.report(bob).kinds if k.kind == "webgpt_comparison")
    assert kind.gold.count == 0
    html = client_for(bob).get(reverse("annotation:my_quality")).content.decode()
    assert "Agreement with the reference preference" in html and "zelda" not in html


def _finished_episode(user, *, screening=False):
    text = f"What did {user} find{' in the test' if screening else ''}?"
    question = import_questions(json.dumps({"question": text}).encode(), filename="q.jsonl").questions.get()
    batch = DemonstrationBatch.objects.create(
        name="screening" if screening else "work", is_screening=screening
    )
    return Episode.objects.create(
        user=user,
        question=question,
        batch=batch,
        status=EpisodeStatus.FINISHED,
        settings={},
        state={"quotes": []},
        answer="An answer.",
        finished_at=timezone.now(),
    )


def test_reviews_reach_their_demonstrator_only(alice, dana, erin, client_for):
    work, screening = _finished_episode(dana), _finished_episode(dana, screening=True)
    client = client_for(alice)
    # A screening demonstration needs a grade: refused, nothing stored.
    refused = client.post(reverse("annotation:episode_review", args=[screening.pk]), {"comment": "good"})
    assert refused.status_code == 302 and not DemonstrationReview.objects.exists()
    for bad in ("0", "8", "6.5", "x"):
        client.post(reverse("annotation:episode_review", args=[work.pk]), {"grade": bad, "comment": "c"})
    assert not DemonstrationReview.objects.exists()
    client.post(
        reverse("annotation:episode_review", args=[screening.pk]), {"grade": "6", "comment": "REVIEW-ONE"}
    )
    client.post(reverse("annotation:episode_review", args=[work.pk]), {"grade": "", "comment": "REVIEW-TWO"})
    client.post(
        reverse("annotation:episode_review", args=[work.pk]), {"grade": "3", "comment": "REVIEW-TWO-B"}
    )
    reviews = DemonstrationReview.objects.order_by("episode_id")
    assert [(r.episode_id, r.grade, r.comment) for r in reviews] == [
        (work.pk, 3, "REVIEW-TWO-B"),  # the same researcher's second review replaced the first
        (screening.pk, 6, "REVIEW-ONE"),
    ]
    html = client_for(dana).get(reverse("annotation:my_quality")).content.decode()
    assert "REVIEW-ONE" in html and "REVIEW-TWO-B" in html and "screening test" in html
    assert "a researcher" in html and "alice" not in html
    other = client_for(erin).get(reverse("annotation:my_quality")).content.decode()
    assert "REVIEW-ONE" not in other and "No reviews yet" in other
    # Erin may not open dana's episode (404), nor review it (not a researcher: 403).
    assert client_for(erin).get(reverse("annotation:episode", args=[work.pk])).status_code == 404
    assert client_for(erin).post(reverse("annotation:episode_review", args=[work.pk])).status_code == 403


def test_the_review_api(alice, dana, client_for):
    episode = _finished_episode(dana, screening=True)
    client = client_for(alice)
    url = f"/api/episodes/{episode.pk}/review"
    assert client.post(url, {"comment": "no grade"}, content_type="application/json").status_code == 400
    assert client.post(url, {"grade": 9}, content_type="application/json").status_code == 400
    response = client.post(url, {"grade": 7, "comment": "clear"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["grade"] == 7
    assert (
        client.post(
            "/api/episodes/2147483000/review", {"grade": 7}, content_type="application/json"
        ).status_code
        == 404
    )
    assert client_for(dana).post(url, {"grade": 1}, content_type="application/json").status_code == 403
    assert DemonstrationReview.objects.get().grade == 7


def test_a_researcher_enters_a_reference_on_the_task_page(alice, client_for):
    batch = _batch(alice, "minimal_comparison", screening=True, questions=1, prefix="R")
    item = batch.items.get()
    client = client_for(alice)
    gold = client.get(reverse("console:feedback_gold", args=[batch.pk]))
    assert gold.status_code == 200 and "Enter reference" in gold.content.decode()
    started = client.post(reverse("console:feedback_reference", args=[batch.pk]), {"item": item.pk})
    task = Assignment.objects.get(item=item, labeler=alice)
    assert task.is_reference and started.url == reverse("annotation:task", args=[task.pk])
    page = client.get(started.url)
    assert page.status_code == 200 and "Save reference" in page.content.decode()
    # The researcher sees the answers in id order: A is the lower id; "B better" prefers the higher id.
    body = {
        "rating-accuracy": "equal",
        "rating-coherence": "equal",
        "rating-overall": "b_better",
        "submit_key": str(uuid.uuid4()),
        "version": "0",
    }
    done = client.post(reverse("annotation:task_submit", args=[task.pk]), body)
    assert done.status_code == 302
    assert done.url == reverse("console:feedback_gold", args=[batch.pk]) + f"#item-{item.pk}"
    task.refresh_from_db()
    item.refresh_from_db()
    assert task.status == AssignmentStatus.REFERENCE
    assert item.is_gold and item.gold_expected == {"flags": [], "preference": -0.5}
    assert (item.slots_taken, item.is_open) == (0, True)  # the labelers' overlap is untouched
    shown = client.get(reverse("console:feedback_gold", args=[batch.pk])).content.decode()
    assert "B better" in shown and "Revise your reference" in shown


def test_a_researcher_who_judged_as_a_labeler_cannot_enter_the_reference(alice, client_for):
    alice.groups.add(*make_user(type(alice), "x", "labeler").groups.all())
    batch = _batch(alice, questions=1, prefix="L")
    item = batch.items.get()
    _judge(alice, item, sorted(item.answers.values_list("id", flat=True)), "a_better")
    response = client_for(alice).post(
        reverse("console:feedback_reference", args=[batch.pk]), {"item": item.pk}
    )
    assert response.url == reverse("console:feedback_gold", args=[batch.pk])
    assert not Assignment.objects.filter(is_reference=True).exists()


def test_explanations_are_written_once_per_gold_item(gold_world, alice, client_for):
    batch, items, _ = gold_world
    client = client_for(alice)
    url = reverse("console:feedback_gold", args=[batch.pk])
    saved = client.post(
        url, {"item": items[2].pk, "explanation": "  Both answers say it; the lower cites.  "}
    )
    assert saved.status_code == 302
    items[2].refresh_from_db()
    assert items[2].gold_explanation == "Both answers say it; the lower cites."
    other = _batch(alice, questions=1, prefix="O").items.get()
    for body in (
        {"item": other.pk, "explanation": "x"},
        {"item": "abc"},
        {"item": items[0].pk, "explanation": "x" * 5001},
    ):
        assert client.post(url, body).status_code == 400
    assert FeedbackItem.objects.get(pk=other.pk).gold_explanation == ""
    assert FeedbackItem.objects.get(pk=items[0].pk).gold_explanation == ""


def test_others_tasks_stay_404_for_researchers(gold_world, alice, client_for):
    _, _, tasks = gold_world
    client = client_for(alice)
    body = {"rating-overall": "a_better", "submit_key": str(uuid.uuid4()), "version": "0"}
    assert client.post(reverse("annotation:task_submit", args=[tasks[0].pk]), body).status_code == 404
    assert (
        client.post(reverse("annotation:task_skip", args=[tasks[0].pk]), {"reason": "x"}).status_code == 404
    )
    assert client.get(f"/api/tasks/{tasks[0].pk}").status_code == 404


def test_who_may_open_my_quality(alice, bob, dana, charlie, client_for):
    url = reverse("annotation:my_quality")
    assert client_for(bob).get(url).status_code == 200
    assert client_for(dana).get(url).status_code == 200
    assert client_for(alice).get(url).status_code == 403
    assert client_for(charlie).get(url).status_code == 403
    assert client_for(None).get(url).status_code == 302
    assert client_for(alice).get("/api/me/quality").status_code == 403
