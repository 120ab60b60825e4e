"""The labelers' guidelines: a page per template and rating preset with scales.py's definitions and a worked
example; linked from every task page and the tasks landing page; for labelers and researchers only."""

from __future__ import annotations

import re
from dataclasses import replace
from html import escape

import pytest
from django.urls import reverse

from annotation.feedback import guidelines, scales
from annotation.feedback.guideline_examples import EXAMPLES
from annotation.models import FeedbackBatch

pytestmark = pytest.mark.django_db


def page(client, user, template: str, preset: str = "") -> str:
    client.force_login(user)
    response = client.get(guidelines.guidelines_url(template, preset))
    assert response.status_code == 200
    return response.content.decode()


def shows(body: str, *labels: str) -> list[str]:
    """The labels the page does not show (escaped as Django escapes them)."""
    return [label for label in labels if escape(label) not in body]


def test_the_webgpt_comparison_page_defines_every_flag_level_and_rating(client, bob):
    body = page(client, bob, "webgpt_comparison")
    labels = [
        label
        for choices in (
            scales.COMPARISON_SCALE,
            scales.WEBGPT_DIMENSIONS,
            scales.QUESTION_FLAGS,
            scales.TRUST_LEVELS,
            scales.CLAIM_SUPPORT,
            scales.CLAIM_RELEVANCE,
        )
        for _, label in choices
    ]
    assert len(scales.WEBGPT_DIMENSIONS) == 6
    assert shows(body, *labels) == []
    # Each dimension is a term with its definition, and the paper's priorities for overall usefulness.
    for code, label in scales.WEBGPT_DIMENSIONS:
        meaning = guidelines.DIMENSION_MEANINGS["webgpt_comparison"][code]
        assert f"<dt>{escape(label)}</dt><dd>{escape(meaning)}</dd>" in body
    assert "Whether or not the core question has been answered." in body


def test_the_minimal_comparison_page_has_its_three_ratings_and_not_the_claims(client, bob):
    body = page(client, bob, "minimal_comparison")
    assert shows(body, *(label for _, label in scales.MINIMAL_DIMENSIONS + scales.COMPARISON_SCALE)) == []
    assert shows(body, *(label for _, label in scales.CLAIM_SUPPORT)) != []


def test_the_ranking_page_has_the_likert_scale_and_every_tag_of_each_set(client, bob):
    body = page(client, bob, "ranking")
    tags = [label for tags in scales.RANKING_TAG_SETS.values() for _, label in tags]
    assert shows(body, *(label for _, label in scales.LIKERT_7), *tags) == []
    assert "WebGPT: factual questions (the default)" in body


@pytest.mark.parametrize("preset", scales.RATING_PRESETS)
def test_a_preset_page_has_its_criteria_and_no_other_presets(client, bob, preset):
    body = page(client, bob, "rating", preset)
    fields = scales.rating_fields(preset)
    assert shows(body, *(field.label for field in fields), *(field.help for field in fields)) == []
    assert shows(body, *(label for field in fields for _, label in field.choices)) == []
    others = [f.label for name in scales.RATING_PRESETS if name != preset for f in scales.rating_fields(name)]
    assert shows(body, *others) == others


def test_the_rating_page_without_a_preset_has_every_presets_criteria(client, alice):
    body = page(client, alice, "rating")
    assert shows(body, *(f.label for name in scales.RATING_PRESETS for f in scales.rating_fields(name))) == []


def test_the_worked_examples_judge_with_the_task_pages_labels(client, bob):
    body = page(client, bob, "webgpt_comparison")
    # Onions: A is much better overall, and B's main claim is unsupported.
    assert "<dt>Overall usefulness</dt><dd>A much better</dd>" in body
    assert "<td>Unsupported</td><td>Relevant</td>" in body
    body = page(client, bob, "rating", "gophercite")
    assert "<dt>Is the answer supported by the quoted evidence?</dt><dd>Yes</dd>" in body


def test_an_example_with_a_code_scales_does_not_have_breaks_the_page(monkeypatch):
    wrong = replace(EXAMPLES["minimal_comparison"], judgement=(("accuracy", "a_lot_better"),))
    monkeypatch.setitem(guidelines.EXAMPLES, "minimal_comparison", wrong)
    with pytest.raises(KeyError, match="a_lot_better"):
        guidelines.page_context("minimal_comparison")


@pytest.mark.parametrize(
    ("template", "preset"),
    [(template, "") for template, _ in scales.TEMPLATES] + [("rating", p) for p in scales.RATING_PRESETS],
)
def test_the_contents_link_to_every_section_and_each_heading_is_there_once(client, bob, template, preset):
    body = page(client, bob, template, preset)
    anchors = re.findall(r'<a href="#([\w-]+)">', body)
    assert anchors
    assert [anchor for anchor in anchors if body.count(f'id="{anchor}"') != 1] == []


@pytest.mark.parametrize(
    "path",
    [
        "/tasks/guidelines/nope/",
        "/tasks/guidelines/ranking/gophercite/",  # only ratings have presets
        "/tasks/guidelines/rating/nope/",
    ],
)
def test_an_unknown_template_or_preset_is_a_404(client, bob, path):
    client.force_login(bob)
    assert client.get(path).status_code == 404


@pytest.mark.parametrize(("who", "status"), [("alice", 200), ("bob", 200), ("dana", 403), ("charlie", 403)])
def test_labelers_and_researchers_read_the_guidelines_and_nobody_else(client, request, who, status):
    client.force_login(request.getfixturevalue(who))
    for url in (
        reverse("annotation:guidelines"),
        guidelines.guidelines_url("webgpt_comparison"),
        guidelines.guidelines_url("rating", "webglm"),
    ):
        assert client.get(url).status_code == status, url


def test_anonymous_visitors_are_sent_to_sign_in(client):
    response = client.get(guidelines.guidelines_url("ranking"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_the_index_and_the_tasks_landing_page_link_to_every_guidelines_page(client, alice, bob):
    urls = [guidelines.guidelines_url(template) for template, _ in scales.TEMPLATES]
    urls += [guidelines.guidelines_url("rating", preset) for preset in scales.RATING_PRESETS]
    client.force_login(alice)
    index = client.get(reverse("annotation:guidelines")).content.decode()
    client.force_login(bob)
    landing = client.get(reverse("annotation:next_task")).content.decode()
    for body in (index, landing):
        assert [url for url in urls if f'href="{url}"' not in body] == []


def test_every_task_page_links_to_its_templates_guidelines_in_a_new_tab(
    client, freshwiki, demo_site, django_user_model
):
    batches = FeedbackBatch.objects.filter(is_screening=False)  # the demo labeler is past the screening
    assert {batch.template for batch in batches} == set(scales.codes(scales.TEMPLATES))
    client.force_login(django_user_model.objects.get(username="labeler"))
    for batch in batches:
        FeedbackBatch.objects.exclude(pk=batch.pk).update(is_active=False)
        FeedbackBatch.objects.filter(pk=batch.pk).update(is_active=True)
        response = client.post(reverse("annotation:task_start"), follow=True)
        body = response.content.decode()
        url = guidelines.guidelines_url(batch.template, batch.preset)
        assert f'<a href="{url}" target="_blank" rel="noopener">Guidelines</a>' in body, batch
        client.post(
            reverse("annotation:task_skip", args=[response.context["assignment"].pk]), {"reason": "x"}
        )
