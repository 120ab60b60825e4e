"""An experiment report's preference figures (issue 39), by hand: a policy against the human demonstrations
(its answer side A) and two policies against each other, from each side's point of view (the side B policy
reads 1 - A's preference, its interval turned round), from the labelers' judgements and from a judge run's
verdicts (both orders agreeing); a batch of one policy's own samples is no comparison between policies."""

from __future__ import annotations

import pytest

from annotation.models import Answer, FeedbackItem
from annotation.models.judging import JudgeKind, JudgeRun, ModelJudgement
from tests.test_feedback_from_samples import POLICY, ask, batch_from, episode, make_run
from tests.test_feedback_results import judge, ratings
from training.evaluation.experiments import PolicyKey, experiment_report
from training.models import Experiment

pytestmark = pytest.mark.django_db


def by_side(item: FeedbackItem) -> tuple[Answer, Answer]:
    sides = {side: int(pk) for pk, side in item.sides.items()}
    return Answer.objects.get(pk=sides["A"]), Answer.objects.get(pk=sides["B"])


def verdict(run: JudgeRun, item: FeedbackItem, code_for_a_first: str, flipped: str) -> None:
    """The judge asked in both orders, agreeing: ``code_for_a_first`` with side A shown first."""
    a, b = by_side(item)
    ModelJudgement.objects.create(
        run=run, item=item, swapped=False, order=[a.pk, b.pk], response=ratings(overall=code_for_a_first)
    )
    ModelJudgement.objects.create(
        run=run, item=item, swapped=True, order=[b.pk, a.pk], response=ratings(overall=flipped)
    )


def figures_of(report: dict, policy: str) -> dict[str, dict]:
    (found,) = [p for p in report["policies"] if p["policy"] == policy]
    return {figure["label"]: figure for figure in found["figures"]}


def test_preferences_against_the_demonstrations_and_each_other_by_people_and_a_judge(bob, dana):
    sky, sea = ask("Why is the sky blue?", "Why is the sea salty?")
    best_of_2 = make_run({sky: [0.2, 0.8], sea: [0.5, 0.1]})  # scored by tiny-rm
    other = make_run({sky: [0.7], sea: [0.1]}, policy="other-policy")
    own = make_run({sky: [0.3, 0.4], sea: [0.2, 0.1]})  # the same policy again: pairs of its own samples
    episode(sky, "Rayleigh scattering.", user=dana)
    episode(sea, "Dissolved minerals.", user=dana)

    # Against the demonstrations: bob prefers the model (side A) on sky, calls sea equal -> 0.75.
    demos = batch_from("minimal_comparison", [best_of_2], vs_demonstrations=True)
    sky_item, sea_item = demos.items.order_by("question_id")
    judge(sky_item, bob, list(by_side(sky_item)), ratings(overall="a_better"))
    judge(sea_item, bob, list(by_side(sea_item))[::-1], ratings(overall="equal"))
    # The two policies (best-of-2 side A): bob prefers side B on both questions (once shown B first).
    pairs = batch_from("minimal_comparison", [best_of_2, other])
    sky_pair, sea_pair = pairs.items.order_by("question_id")
    judge(sky_pair, bob, list(by_side(sky_pair)), ratings(overall="b_better"))
    judge(sea_pair, bob, list(by_side(sea_pair))[::-1], ratings(overall="a_much_better"))  # B shown first
    # A judge on the pairs: side A on sky, side B on sea -> 0.5 for either policy.
    run = JudgeRun.objects.create(batch=pairs, judge_kind=JudgeKind.ENDPOINT, judge_name="judge-x")
    verdict(run, sky_pair, "a_better", "b_better")
    verdict(run, sea_pair, "b_better", "a_better")
    batch_from("minimal_comparison", [own])  # one policy's own samples: not a comparison of policies

    first, second = PolicyKey.of(best_of_2), PolicyKey.of(other)
    assert (first.label, second.label) == (f"{POLICY} best-of-2 (tiny-rm)", "other-policy best-of-1")
    experiment = Experiment.objects.create(name="by hand", policies=[first.stored(), second.stored()])
    report = experiment_report(experiment)
    mine = figures_of(report, first.label)
    assert set(mine) == {
        "Preferred to human demonstrations (people)",
        "Preferred to other-policy best-of-1 (people)",
        "Preferred to other-policy best-of-1 (judge-x)",
    }
    demo = mine["Preferred to human demonstrations (people)"]
    assert (demo["value"], demo["questions"]) == (0.75, 2)
    assert demo["url"] == f"/console/feedback/{demos.pk}/results/"
    people = mine["Preferred to other-policy best-of-1 (people)"]
    assert (people["value"], people["low"], people["high"]) == (0.0, 0.0, 0.0)
    assert mine["Preferred to other-policy best-of-1 (judge-x)"]["value"] == 0.5
    assert (
        mine["Preferred to other-policy best-of-1 (judge-x)"]["url"] == f"/console/training/judge/{run.pk}/"
    )
    theirs = figures_of(report, second.label)
    assert set(theirs) == {
        f"Preferred to {first.label} (people)",
        f"Preferred to {first.label} (judge-x)",
    }
    flipped = theirs[f"Preferred to {first.label} (people)"]
    assert (flipped["value"], flipped["low"], flipped["high"]) == (1.0, 1.0, 1.0)
    assert theirs[f"Preferred to {first.label} (judge-x)"]["value"] == 0.5
    # Both policies' runs: best-of-2's two runs (its own pairs batch adds no figure), other-policy's one.
    (found,) = [p for p in report["policies"] if p["policy"] == first.label]
    assert [r["id"] for r in found["runs"]] == [best_of_2.pk, own.pk]
