"""Routing a batch by a judge run: the judge's confident, order-consistent verdicts decide their items and
labelers never get them, a seeded audit share of them goes to labelers too, the rest to labelers; while a
routed run is queued or running the gate holds the batch, and a failed or cancelled one holds nothing; the
results say how many items each path decided, the audit measures the routed verdicts, and the preference
counts the judge's verdicts only when the researcher asks."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from annotation.feedback import assignment as work
from annotation.feedback.results import batch_results
from annotation.feedback.stats import batch_progress
from annotation.judging.reading import Item
from annotation.judging.routed import side_a_score
from annotation.judging.routing import audit_count, route_batch, routing_settings
from annotation.judging.verdicts import Verdict
from annotation.models import (
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    JudgeKind,
    JudgeRun,
    ModelJudgement,
    RoutePath,
    Routing,
)
from annotation.workforce.gate import open_batch_priorities, open_batches
from core.jobs.models import JobStatus
from core.models import AuditEntry
from tests.conftest import make_user
from tests.test_feedback_results import answers_to, ask, item_of, judge, ratings, results_url

pytestmark = pytest.mark.django_db


def test_the_audit_share_is_rounded_up_so_any_share_audits_something():
    assert [audit_count(0.1, n) for n in (0, 1, 5, 10, 30, 31)] == [0, 1, 1, 1, 3, 4]
    assert (audit_count(0.0, 20), audit_count(1.0, 4), audit_count(0.25, 6)) == (0, 4, 2)


def test_routing_settings_have_defaults_and_bad_ones_are_named():
    chosen = routing_settings({})
    assert (chosen.confidence_threshold, chosen.audit_share, chosen.seed) == (0.8, 0.1, 0)
    assert routing_settings({"confidence_threshold": 1, "audit_share": 0, "seed": 9}).seed == 9
    for bad, name in (
        ({"audit_share": 1.5}, "audit_share"),
        ({"confidence_threshold": "high"}, "confidence_threshold"),
        ({"seed": -1}, "seed"),
        ({"audit_share": True}, "audit_share"),
    ):
        with pytest.raises(ValueError, match=f"'{name}'"):
            routing_settings(bad)


def test_a_verdict_counts_for_side_a_as_the_results_score_a_judgement():
    verdict = Verdict(1, (10, 20), None, None, True, {"preference": 0.5}, 0.9)
    assert side_a_score(verdict, Item(1, {})) == 1.0  # side A defaults to the lower id
    assert side_a_score(verdict, Item(1, {"20": "A", "10": "B"})) == 0.0


def new_run(batch, status=JobStatus.RUNNING, route=True, **settings) -> JudgeRun:
    return JudgeRun.objects.create(
        batch=batch,
        judge_kind=JudgeKind.REWARD_MODEL,
        judge_name="demo reward model",
        route=route,
        status=status,
        settings=settings,
    )


def asked(run, item, first: str | None, second: str | None, confidence: float | None) -> None:
    """The judge on ``item`` in both orders (codes as shown; None: an output it could not read)."""
    low, high = item.answers.order_by("id")
    for swapped, shown, code in ((False, [low, high], first), (True, [high, low], second)):
        ModelJudgement.objects.create(
            run=run,
            item=item,
            swapped=swapped,
            order=[answer.pk for answer in shown],
            response=ratings(overall=code) if code else None,
            error="" if code else "not JSON",
            confidence=confidence,
        )


@pytest.fixture
def routed(bob, django_user_model):
    """Ten one-question items. Bob holds item 0 before the run starts; carol skipped item 5. The judge
    prefers the lower id in both orders with confidence 0.9 on items 0-5 and on gold item 8; item 6 only
    0.5; item 7 flips; item 9 is unreadable in one order."""
    carol = make_user(django_user_model, "carol", "labeler")
    batch = FeedbackBatch.objects.create(name="routed", template="minimal_comparison", overlap=1)
    items = [item_of(batch, answers_to(ask(f"Question {n}?"), 2), gold=n == 8) for n in range(10)]
    assert work.next_assignment(bob).item == items[0]
    judge(items[5], carol, list(items[5].answers.all()), {}, status=AssignmentStatus.SKIPPED)
    run = new_run(batch, confidence_threshold=0.8, audit_share=0.25, seed=7)
    for item in (*items[:6], items[8]):
        asked(run, item, "a_better", "b_better", 0.9)
    asked(run, items[6], "a_better", "b_better", 0.5)
    asked(run, items[7], "a_better", "a_better", 0.95)
    asked(run, items[9], "a_better", None, 0.9)
    return batch, run, items


def paths(items) -> list[str]:
    found = dict(Routing.objects.values_list("item_id", "path"))
    return [found.get(item.pk) for item in items]


def test_confident_consistent_items_go_to_the_judge_less_an_audit_share(routed, alice):
    batch, run, items = routed
    # Candidates: items 1-5 (0 is bob's, 6 unsure, 7 flips, 8 gold, 9 half read); a quarter of 5, rounded
    # up: 2 audited, 3 decided by the judge.
    assert route_batch(run) == {"judge": 3, "audit": 2, "human": 5}
    routed_paths = paths(items)
    assert [routed_paths[n] for n in (0, 6, 7, 8, 9)] == [RoutePath.HUMAN] * 5
    assert sorted(routed_paths[1:6]) == ["audit", "audit", "judge", "judge", "judge"]
    decided = [item for item, path in zip(items, routed_paths, strict=True) if path == RoutePath.JUDGE]
    assert not FeedbackItem.objects.filter(pk__in=[i.pk for i in decided], is_open=True).exists()
    # The verdict kept: the preference for the lower id, for the judge's candidates only.
    verdicts = dict(Routing.objects.values_list("item_id", "verdict"))
    assert verdicts[items[1].pk] == 0.5 and verdicts[items[7].pk] is None
    entry = AuditEntry.objects.get(action="judge_run.route")
    assert entry.data["judge"] == 3 and entry.data["settings"]["seed"] == 7
    # Items a judge decided need no labeler: the batch's progress asks for the others only.
    assert batch_progress(batch)["needed"] == 7 and batch_progress(batch)["judge_decided"] == 3


def test_the_audit_draw_is_reproducible_and_routing_twice_changes_nothing(routed):
    batch, run, items = routed
    route_batch(run)
    first = paths(items)
    assert route_batch(run) == {"judge": 3, "audit": 2, "human": 5} and Routing.objects.count() == 10
    Routing.objects.all().delete()
    FeedbackItem.objects.filter(batch=batch).update(is_open=True)
    FeedbackItem.objects.filter(pk=items[0].pk).update(is_open=False)  # bob's, as before
    route_batch(run)
    assert paths(items) == first
    # A second routed run finds every item routed: it routes none.
    assert route_batch(new_run(batch)) == {"judge": 0, "audit": 0, "human": 0}


def test_a_run_that_does_not_route_or_has_bad_settings_changes_nothing(routed):
    batch, run, items = routed
    with pytest.raises(ValueError, match="does not route"):
        route_batch(new_run(batch, route=False))
    run.settings = {"audit_share": 2}
    with pytest.raises(ValueError, match="'audit_share'"):
        route_batch(run)
    assert not Routing.objects.exists()
    assert list(FeedbackItem.objects.filter(is_open=False)) == [items[0]]  # bob's, full before any routing


def test_labelers_never_get_the_items_the_judge_decided(routed, django_user_model):
    _, run, items = routed
    route_batch(run)
    run.status = JobStatus.DONE
    run.save()
    dave = make_user(django_user_model, "dave", "labeler")
    taken = []
    while (task := work.next_assignment(dave)) is not None:
        taken.append(task.item_id)
        work.skip(task.pk, dave, "testing the pool")  # the slot goes back; dave never gets it again
    routed_paths = dict(Routing.objects.values_list("item_id", "path"))
    # Everything but the judge's three and bob's item 0 (overlap 1): the audit share included.
    assert sorted(taken) == sorted(i.pk for i in items[1:] if routed_paths[i.pk] != RoutePath.JUDGE)
    assert len(taken) == 6 and {routed_paths[pk] for pk in taken} == {"audit", "human"}


@pytest.mark.parametrize(
    ("status", "route", "held"),
    [
        (JobStatus.QUEUED, True, True),
        (JobStatus.RUNNING, True, True),
        (JobStatus.FAILED, True, False),
        (JobStatus.CANCELLED, True, False),
        (JobStatus.DONE, True, False),
        (JobStatus.RUNNING, False, False),
    ],
)
def test_a_routed_run_holds_its_batch_while_queued_or_running(bob, status, route, held):
    batch = FeedbackBatch.objects.create(name="held", template="minimal_comparison")
    item = item_of(batch, answers_to(ask("Held?"), 2))
    new_run(batch, status=status, route=route)
    other = FeedbackBatch.objects.create(name="free", template="minimal_comparison")
    assert (batch.pk in open_batch_priorities(bob)) is not held and other.pk in open_batch_priorities(bob)
    assert open_batches(bob).filter(pk=batch.pk).exists() is not held
    assert work.available_items(bob, timezone.now()).filter(pk=item.pk).exists() is not held
    task = work.next_assignment(bob)
    assert (task is None) is held


@pytest.fixture
def audited(routed, django_user_model):
    """The routed batch after its run, dave auditing: he agrees with the judge on one audited item (the
    lower id better) and not on the other."""
    batch, run, items = routed
    route_batch(run)
    run.status = JobStatus.DONE
    run.save()
    dave = make_user(django_user_model, "dave", "labeler")
    audit = [i for i in items if Routing.objects.get(item=i).path == RoutePath.AUDIT]
    for item, code in zip(audit, ("a_better", "b_much_better"), strict=True):
        judge(item, dave, list(item.answers.order_by("id")), ratings(overall=code))
    return batch, run


def test_the_results_say_what_each_path_decided_and_how_the_audit_went(audited):
    batch, _ = audited
    results = batch_results(batch)
    routing = results["judges"][0]["routing"]
    assert routing["paths"] == {"judge": 3, "audit": 2, "human": 5}
    assert routing["judged_by_labelers"] == {"judge": 0, "audit": 2, "human": 0}
    # Two audited items of two questions: 1 and 0.
    audit = routing["audit"]
    assert (audit["value"], audit["low"], audit["high"], audit["judgements"]) == (0.5, 0.0, 1.0, 2)
    assert routing["preference"] is None  # not asked
    # The headline counts dave's two judgements only: (1 + 0) / 2.
    assert results["preference"][0]["value"] == 0.5 and results["preference"][0]["judgements"] == 2


def test_the_preference_counts_the_judges_verdicts_only_when_asked(audited, client_for, alice):
    batch, run = audited
    results = batch_results(batch, judge_verdicts=True)
    preference = results["judges"][0]["routing"]["preference"]
    # dave's 1 and 0, plus the judge's three verdicts for the lower id (side A): 4 / 5.
    assert (preference["value"], preference["judgements"]) == (0.8, 5)
    assert (preference["labeler_judgements"], preference["judge_verdicts"]) == (2, 3)
    assert preference["label"].endswith("(2 labelers' judgements, 3 verdicts)")
    assert results["preference"] == batch_results(batch)["preference"]  # the headline is the same
    client = client_for(alice)
    page = client.get(results_url(batch, judge_verdicts="on")).content.decode()
    assert "0.800" in page and 'name="judge_verdicts" value="on" checked' in page
    table = reverse("console:feedback_results_csv", args=[batch.pk, f"judge-{run.pk}-routed"])
    assert f"{table}?judge_verdicts=on" in page
    assert len(client.get(table, {"judge_verdicts": "on"}).content.decode().splitlines()) == 3
    assert len(client.get(table).content.decode().splitlines()) == 2
    bad = client.get(results_url(batch, judge_verdicts="maybe"))
    assert bad.status_code == 400 and "judge_verdicts" in bad.content.decode()
    api = client.get(reverse("api-batch-results", args=[batch.pk]), {"judge_verdicts": "on"}).json()
    assert api["judges"][0]["routing"]["preference"]["value"] == 0.8
