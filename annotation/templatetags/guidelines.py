"""Links to the labelers' guidelines: ``{% guidelines_url batch %}`` on a task page, ``{% guideline_pages %}``
for a list of them all (the tasks landing page)."""

from __future__ import annotations

from django import template

from annotation.feedback.guidelines import GuidelinePage
from annotation.feedback.guidelines import guideline_pages as all_pages
from annotation.feedback.guidelines import guidelines_url as url_of
from annotation.models import FeedbackBatch

register = template.Library()


@register.simple_tag
def guidelines_url(batch: FeedbackBatch) -> str:
    """The guidelines of the batch's template (and preset)."""
    return url_of(batch.template, batch.preset)


@register.simple_tag
def guideline_pages() -> list[GuidelinePage]:
    return all_pages()
