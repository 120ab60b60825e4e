"""The labelers' guidelines: a page per task template, and per preset of the rating template.

Every label on these pages comes from scales.py, the one definition the task pages, validation and exports
use; this module adds what each choice means (WebGPT Appendix C.2 where the paper says it, our own words
where it does not) and the worked examples of guideline_examples.py. The prose around them is in the
templates tasks/guidelines_*.html.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotation.feedback import scales
from annotation.feedback.guideline_examples import EXAMPLES, GLACIER, Example
from annotation.feedback.steps import STEP_RATINGS, STEP_REASONS
from core.permissions import Role, any_role_required

# What each choice means, by code. A code of scales.py without an entry here fails the page (KeyError),
# so a new dimension or level cannot reach labelers undefined.
DIMENSION_MEANINGS: dict[str, dict[str, str]] = {
    "webgpt_comparison": {
        "unsupported": "Which answer has less information that is not supported: claims backed by neither a "
        "reliable reference nor common knowledge.",
        "irrelevant": "Which answer has less information that does not help answer the question.",
        "supported_usefulness": "How useful the supported information of each answer is: the claims backed "
        "by a reliable reference or common knowledge.",
        "weakly_supported_usefulness": "How useful the weakly supported information of each answer is: "
        "claims a reference backs only in part, or a reference you trust only somewhat.",
        "coherence": "How coherent the answer is (clear, well organised, reads as one answer), and whether "
        "there are citation errors (a [n] that points to a quote that does not say what is cited).",
        "overall": "Weighing everything up: which answer is more useful to the person who asked.",
    },
    "minimal_comparison": {
        "accuracy": "Which answer is more accurate: fewer false or misleading statements, as far as you "
        "can tell from the answers themselves.",
        "coherence": "Which answer is clearer and better organised.",
        "overall": "Which answer would be more useful to the person who asked.",
    },
}
SCALE_MEANINGS = {
    "a_much_better": "A is clearly and substantially better.",
    "a_better": "A is better, by a small but real margin.",
    "equal": "Neither is better (also when both are equally bad).",
    "b_better": "B is better, by a small but real margin.",
    "b_much_better": "B is clearly and substantially better.",
}
FLAG_MEANINGS = {
    "nonsense": "It cannot be understood or has no sensible answer (garbled, self-contradictory).",
    "should_not_answer": "Answering would do harm or take a side on a contested opinion (for example, it "
    "asks for help to hurt someone).",
}
TRUST_MEANINGS = {
    "trustworthy": "A reputable source for this topic: an encyclopedia, a government or university page, a "
    "major news outlet, an expert publication.",
    "somewhat": "Usually right but not authoritative: a blog by a practitioner, a commercial page, a popular "
    "article without sources.",
    "untrustworthy": "Anonymous, partisan, satirical or known to be unreliable: forum posts, content farms.",
}
SUPPORT_MEANINGS = {
    "supported": "Backed up by a reliable reference (a quote says it), or common knowledge.",
    "weakly_supported": "A reference backs it only in part, or only a reference you trust somewhat.",
    "unsupported": "No reference says it and it is not common knowledge, or the cited quote says "
    "something else.",
}
RELEVANCE_MEANINGS = {
    "relevant": "It helps answer the question.",
    "irrelevant": "True or not, it does not help answer the question.",
}
TEMPLATE_SECTIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "webgpt_comparison": (
        ("task", "The task"),
        ("flags", "Question flags"),
        ("trust", "Trusting references"),
        ("claims", "Claims and their support"),
        ("scale", "The 5-point scale"),
        ("dimensions", "The six comparison ratings"),
        ("overall", "Weighing up overall usefulness"),
        ("required", "Required parts"),
        ("example", "Worked example"),
    ),
    "minimal_comparison": (
        ("task", "The task"),
        ("scale", "The 5-point scale"),
        ("dimensions", "The three ratings"),
        ("example", "Worked example"),
    ),
    "ranking": (
        ("task", "The task"),
        ("ranks", "Ranking"),
        ("likert", "The 1-7 rating"),
        ("tags", "What applies to an answer"),
        ("example", "Worked example"),
    ),
    "rating": (("task", "The task"),),
    "step_review": (
        ("task", "The task"),
        ("ratings", "Good, neutral, bad"),
        ("reasons", "Why a step is bad"),
        ("first-bad", "The first bad step"),
        ("example", "Worked example"),
    ),
    "step_preference": (
        ("task", "The task"),
        ("scale", "The 5-point scale"),
        ("reasons", "What is wrong with the worse action"),
        ("example", "Worked example"),
    ),
}
STEP_RATING_MEANINGS = {
    "good": "The action moves the search for an answer forward: a search that finds pages to read, a click "
    "on a result that helps, a quote that supports the answer, answering once the evidence is in.",
    "neutral": "Reasonable but of little use either way: a scroll past what was in view, a search "
    "rephrased without need.",
    "bad": "A mistake: the action wastes steps or leads the answer astray (the reasons below).",
}
STEP_REASON_MEANINGS = {
    "no_result": "A search or find that finds nothing useful, where a better one was plain.",
    "wrong_link": "A click on a result that does not help, when a better one was in view.",
    "unsupported_quote": "A quote that does not support what the answer says, or supports nothing it needs.",
    "repeated_action": "The same action again with no effect (the same search, the same scroll at the end).",
    "premature_answer": "Answering before the quotes hold the evidence the answer needs.",
    "other": "Anything else: say what in the note.",
}


class GuidelinePage(NamedTuple):
    title: str
    url: str
    presets: tuple[tuple[str, str], ...] = ()  # the rating template's presets: (title, url)


def guidelines_url(template: str, preset: str = "") -> str:
    """The guidelines of a template, or of a rating preset."""
    if template == "rating" and preset:
        return reverse("annotation:preset_guidelines", args=[template, preset])
    return reverse("annotation:template_guidelines", args=[template])


def guideline_pages() -> list[GuidelinePage]:
    """Every guidelines page, in the order of scales.TEMPLATES (the rating page with its presets)."""
    return [
        GuidelinePage(
            title,
            guidelines_url(template),
            tuple(
                (preset_title, guidelines_url(template, preset))
                for preset, preset_title in scales.RATING_PRESET_CHOICES
            )
            if template == "rating"
            else (),
        )
        for template, title in scales.TEMPLATES
    ]


def _label(choices: scales.Choices, code: str) -> str:
    label = scales.label_for(choices, code, default="")
    if not label:
        raise KeyError(f"{code!r} is not one of {scales.codes(choices)}")
    return label


def _defined(choices: scales.Choices, meanings: dict[str, str]) -> list[tuple[str, str]]:
    """(label, meaning) for every choice: a choice without a meaning raises KeyError."""
    return [(label, meanings[code]) for code, label in choices]


def _example(example: Example, template: str, preset: str = "") -> dict[str, Any]:
    """An example with labels instead of codes, for the template tasks/guidelines_example.html."""
    fields = {field.code: field for field in scales.rating_fields(preset)}

    def judged(code: str, value: str) -> tuple[str, str]:
        if template in scales.COMPARISON_TEMPLATES:
            return _label(scales.dimensions_for(template), code), _label(scales.COMPARISON_SCALE, value)
        field = fields[code]
        return field.label, (_label(field.choices, value) if field.choices else value)

    answers = [
        {
            "slot": answer.slot,
            "text": answer.text,
            "quotes": [
                (quote, _label(scales.TRUST_LEVELS, quote.trust) if quote.trust else "")
                for quote in answer.quotes
            ],
            "claims": [
                (
                    claim,
                    _label(scales.CLAIM_SUPPORT, claim.support),
                    _label(scales.CLAIM_RELEVANCE, claim.relevance),
                )
                for claim in answer.claims
            ],
            "rank": answer.rank,
            "likert": _label(scales.LIKERT_7, answer.likert) if answer.likert else "",
            "tags": [_label(scales.ranking_tags(None), tag) for tag in answer.tags],  # the default set
        }
        for answer in example.answers
    ]
    judgement = [judged(code, value) for code, value in example.judgement]
    return {"example": example, "answers": answers, "judgement": judgement}


def _step_example() -> dict[str, Any]:
    """The step review's worked example with labels instead of codes."""
    steps = [
        {
            "number": index + 1,
            "step": step,
            "rating": _label(STEP_RATINGS, step.rating),
            "reason": _label(STEP_REASONS, step.reason) if step.reason else "",
        }
        for index, step in enumerate(GLACIER.steps)
    ]
    first_bad = GLACIER.first_bad
    return {"example": GLACIER, "steps": steps, "first_bad": None if first_bad is None else first_bad + 1}


def _preset(preset: str) -> dict[str, Any]:
    return {
        "code": preset,
        "title": _label(scales.RATING_PRESET_CHOICES, preset),
        "fields": scales.rating_fields(preset),
        "example": _example(EXAMPLES[preset], "rating", preset),
    }


def page_context(template: str, preset: str = "") -> dict[str, Any]:
    """What a guidelines page shows; Http404 for an unknown template or preset."""
    if template not in scales.codes(scales.TEMPLATES):
        raise Http404("No such task template.")
    if preset and (template != "rating" or preset not in scales.RATING_PRESETS):
        raise Http404("No such rating preset.")
    context: dict[str, Any] = {"template": template, "title": _label(scales.TEMPLATES, template)}
    sections = list(TEMPLATE_SECTIONS[template])
    if template == "rating":
        presets = [_preset(code) for code, _ in scales.RATING_PRESET_CHOICES if code == (preset or code)]
        context["presets"] = presets
        sections += [(f"preset-{p['code']}", p["title"]) for p in presets]
        if preset:
            context["preset_title"] = presets[0]["title"]
    elif template == "step_review":
        context["step_ratings"] = _defined(STEP_RATINGS, STEP_RATING_MEANINGS)
        context["step_reasons"] = _defined(STEP_REASONS, STEP_REASON_MEANINGS)
        context["step_example"] = _step_example()
    elif template == "step_preference":
        context["scale"] = _defined(scales.COMPARISON_SCALE, SCALE_MEANINGS)
        context["step_reasons"] = _defined(STEP_REASONS, STEP_REASON_MEANINGS)
        context["step_example"] = _step_example()
    else:
        context["example"] = _example(EXAMPLES[template], template)
    if template in scales.COMPARISON_TEMPLATES:
        context["scale"] = _defined(scales.COMPARISON_SCALE, SCALE_MEANINGS)
        context["dimensions"] = _defined(scales.dimensions_for(template), DIMENSION_MEANINGS[template])
    if template == "webgpt_comparison":
        context["flags"] = _defined(scales.QUESTION_FLAGS, FLAG_MEANINGS)
        context["trust_levels"] = _defined(scales.TRUST_LEVELS, TRUST_MEANINGS)
        context["support_levels"] = _defined(scales.CLAIM_SUPPORT, SUPPORT_MEANINGS)
        context["relevance_levels"] = _defined(scales.CLAIM_RELEVANCE, RELEVANCE_MEANINGS)
        context["overall_label"] = _label(scales.WEBGPT_DIMENSIONS, scales.OVERALL)
    if template == "ranking":
        context["likert"] = [label for _, label in scales.LIKERT_7]
        context["tag_sets"] = [
            (code, title, [label for _, label in scales.ranking_tags(code)])
            for code, title in scales.RANKING_PRESET_CHOICES
        ]
        context["default_tag_set"] = scales.DEFAULT_RANKING_PRESET
        context["k_range"] = (scales.RANKING_MIN_K, scales.RANKING_MAX_K)
    context["sections"] = sections
    return context


@require_GET
@any_role_required(Role.LABELER, Role.RESEARCHER)
def index(request: HttpRequest) -> HttpResponse:
    return render(request, "tasks/guidelines_index.html", {"pages": guideline_pages()})


@require_GET
@any_role_required(Role.LABELER, Role.RESEARCHER)
def template_guidelines(request: HttpRequest, template: str) -> HttpResponse:
    return render(request, f"tasks/guidelines_{template}.html", page_context(template))


@require_GET
@any_role_required(Role.LABELER, Role.RESEARCHER)
def preset_guidelines(request: HttpRequest, template: str, preset: str) -> HttpResponse:
    return render(request, f"tasks/guidelines_{template}.html", page_context(template, preset))
