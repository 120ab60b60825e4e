"""Agreement and the signals of careless work over the API, unrounded: the figures the batch page and the
kind's page show (from the same functions), equal to the ``krippendorff`` package's alpha and to shares
counted by hand, for researchers only."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from django.urls import reverse

from annotation.feedback.agreement import wilson_interval
from annotation.feedback.alpha_stats import batch_alpha, template_alpha
from annotation.workforce.signals import signals_for_kind
from tests.test_alpha import comparisons, people, reference  # noqa: F401 (fixtures)
from tests.test_api import api

pytestmark = pytest.mark.django_db

PREFERENCE = [-1.0, -0.5, 0.0, 0.5, 1.0]
# bob's and carol's preference for the lower answer id on items 1-3 of the ``comparisons`` fixture.
PREFERENCES = [[-0.5, 1.0, -1.0, None], [-0.5, 0.0, -0.5, 0.0]]


def test_a_batchs_alpha_is_the_pages_unrounded_and_the_packages(alice, comparisons, client_for):  # noqa: F811
    body = api(alice).get(reverse("api-batch-agreement", args=[comparisons.pk])).json()
    rows = {row["measure"]: row for row in body["alpha"]}
    overall = rows["overall"]
    assert overall["alpha"] == pytest.approx(reference(PREFERENCES, "ordinal", PREFERENCE), abs=1e-12)
    assert overall["alpha"] != round(overall["alpha"], 2)  # the page's two decimals, and more
    shown = {row.measure: row for row in batch_alpha(comparisons)}["overall"].result  # the page's figures
    assert (overall["alpha"], overall["low"], overall["high"]) == (shown.alpha, shown.low, shown.high)
    assert (overall["level"], overall["items"], overall["units"], overall["values"]) == ("ordinal", 3, 3, 6)
    page = client_for(alice).get(reverse("console:feedback_batch", args=[comparisons.pk])).content.decode()
    assert f"{overall['alpha']:.2f}" in page
    assert f"{overall['low']:.2f} to {overall['high']:.2f}" in page
    assert (rows["flags"]["level"], rows["flags"]["items"], rows["flags"]["values"]) == ("nominal", 4, 16)


def test_a_batch_nobody_may_see_is_missing_to_all_but_researchers(comparisons, people, charlie):  # noqa: F811
    bob, _, _ = people
    url = reverse("api-batch-agreement", args=[comparisons.pk])
    assert api(bob).get(url).status_code == 404
    assert api(charlie).get(url).status_code == 404
    assert api().get(url).status_code == 401


def test_a_kinds_alpha_and_signals_are_its_pages_unrounded(alice, comparisons, people, client_for):  # noqa: F811
    bob, carol, _ = people
    body = api(alice).get(reverse("api-workforce-kind", args=["webgpt_comparison"])).json()
    [overall, *_] = body["alpha"]
    assert overall["alpha"] == template_alpha("webgpt_comparison")[0].result.alpha
    assert overall["alpha"] == pytest.approx(reference(PREFERENCES, "ordinal", PREFERENCE), abs=1e-12)
    theirs = {row["username"]: row for row in body["labelers"]}
    # dave's one submission, excluded on flag review, counts as work but not in the content's signals.
    assert list(theirs) == ["bob", "carol", "dave"]
    assert theirs["dave"]["signals"]["position_bias"]["mine"]["count"] == 0
    # Shown first and preferred: bob on items 1 and 2 of 3 rated; carol never, "equal" (half) on 2 and 4.
    bias = theirs["bob"]["signals"]["position_bias"]
    assert (bias["mine"]["successes"], bias["mine"]["count"], bias["mine"]["value"]) == (2.0, 3, 2 / 3)
    assert (bias["mine"]["low"], bias["mine"]["high"]) == pytest.approx(wilson_interval(2, 3), abs=1e-12)
    assert (bias["others"]["successes"], bias["others"]["count"]) == (1.0, 4)
    assert (bias["expected"], bias["careless"], bias["notable"]) == (0.5, "either", False)
    assert theirs["bob"]["state"] == "qualified" and theirs["bob"]["submitted"] == 4
    computed = signals_for_kind("webgpt_comparison")
    for user in (bob, carol):
        for code, signal in theirs[user.username]["signals"].items():
            expected = getattr(computed[user.pk], code)
            assert signal["mine"] == {"value": expected.mine.value, **asdict(expected.mine)}
    page = client_for(alice).get(reverse("console:workforce_kind", args=["webgpt_comparison"]))
    mine = bias["mine"]
    assert f"{mine['value']:.0%} [{mine['low']:.0%}-{mine['high']:.0%}], n = 3" in page.content.decode()


@pytest.mark.parametrize("kind", ["demonstration", "nope", "rating:nope"])
def test_a_kind_without_feedback_work_is_a_404(alice, kind):
    assert api(alice).get(reverse("api-workforce-kind", args=[kind])).status_code == 404


def test_only_researchers_read_a_kinds_signals(bob, charlie):
    url = reverse("api-workforce-kind", args=["webgpt_comparison"])
    assert api(bob).get(url).status_code == 403
    assert api(charlie).get(url).status_code == 403
    assert api().get(url).status_code == 401
