"""The scales, dimensions and presets of the feedback templates, with small lookups.

Sources: WebGPT (Nakano et al. 2021) Appendix C.2 for the comparison, Appendix F for the minimal comparison;
InstructGPT (Ouyang et al. 2022) for the K-way ranking (K = 4..9, 1-7 Likert, metadata of its Table 3, and a
WebGPT set of metadata for factual questions);
GopherCite (Menick et al. 2022) and TruthfulQA for their single-answer ratings; WebGLM (Liu et al. 2023)
section 4 for its criteria: binary scores for objective metrics, four-level (0-3) scores for subjective ones.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# A citation mark and the space before it: the minimal comparison shows answers without them (Appendix F).
CITATION = re.compile(r"\s*\[\d+\]")

Choices = tuple[tuple[str, str], ...]

TEMPLATES: Choices = (
    ("webgpt_comparison", "WebGPT comparison"),
    ("minimal_comparison", "Minimal comparison"),
    ("ranking", "K-way ranking"),
    ("rating", "Single-answer rating"),
    ("step_review", "Step review"),
    ("step_preference", "Step preference"),
)
COMPARISON_TEMPLATES = ("webgpt_comparison", "minimal_comparison")
# Kinds whose item is a browsing episode to review step by step (``FeedbackItem.episode``), not answers
# (``annotation/feedback/steps.py``): they have no answer slots, and what reads answers leaves them out.
STEP_TEMPLATES = ("step_review", "step_preference")
ANSWER_TEMPLATES = tuple(code for code, _ in TEMPLATES if code not in STEP_TEMPLATES)
# A step review's one requirable part: a rating for every step, also the ones after the first bad step
# (PRM800K's labelers stopped at the first mistake, so by default they need not).
ALL_STEPS = "all_steps"
COMPARISON_SLOTS = ("A", "B")

# The 5-point comparison scale, with its value from A's point of view (also the export score of A; B gets
# the opposite).
COMPARISON_SCALE: Choices = (
    ("a_much_better", "A much better"),
    ("a_better", "A better"),
    ("equal", "Equally good"),
    ("b_better", "B better"),
    ("b_much_better", "B much better"),
)
_PREFERENCE = {"a_much_better": 1.0, "a_better": 0.5, "equal": 0.0, "b_better": -0.5, "b_much_better": -1.0}

# Each dimension asks "which answer is better with respect to this", so all share one direction.
WEBGPT_DIMENSIONS: Choices = (
    ("unsupported", "Unsupported information"),
    ("irrelevant", "Irrelevant information"),
    ("supported_usefulness", "Usefulness of supported information"),
    ("weakly_supported_usefulness", "Usefulness of weakly supported information"),
    ("coherence", "Coherence"),
    ("overall", "Overall usefulness"),
)
MINIMAL_DIMENSIONS: Choices = (
    ("accuracy", "Accuracy"),
    ("coherence", "Coherence"),
    ("overall", "Overall usefulness"),
)
OVERALL = "overall"

QUESTION_FLAGS: Choices = (
    ("nonsense", "The question does not make sense"),
    ("should_not_answer", "The question should not be answered"),
)
# C.2 asks to "rate the trustworthiness of any references relied upon" without naming levels.
TRUST_LEVELS: Choices = (
    ("trustworthy", "Trustworthy"),
    ("somewhat", "Somewhat trustworthy"),
    ("untrustworthy", "Not trustworthy"),
)
CLAIM_SUPPORT: Choices = (
    ("supported", "Supported (by a reference or common knowledge)"),
    ("weakly_supported", "Weakly supported"),
    ("unsupported", "Unsupported"),
)
CLAIM_RELEVANCE: Choices = (
    ("relevant", "Relevant"),
    ("irrelevant", "Irrelevant"),
)

RANKING_MIN_K = 4
RANKING_MAX_K = 9
LIKERT_MIN = 1
LIKERT_MAX = 7
LIKERT_7: tuple[tuple[int, str], ...] = tuple(
    (n, {1: "1 (very bad)", 7: "7 (excellent)"}.get(n, str(n))) for n in range(LIKERT_MIN, LIKERT_MAX + 1)
)
# The metadata checkboxes of a ranking, per batch preset. InstructGPT's (its Table 3) judge an assistant's
# replies to instructions; on factual WebGPT questions half of them ("Inappropriate for a customer
# assistant", "Contains sexual content") do not apply, so WebGPT questions get checkboxes from WebGPT's own
# criteria (C.2: unsupported and irrelevant information, coherence incl. citation errors). A code means the
# same in every set, so exports of both can be read together.
WEBGPT_RANKING_TAGS: Choices = (
    ("fails_instruction", "Does not answer the question"),
    ("hallucination", "Hallucination (makes up facts)"),
    ("unsupported", "Makes claims its references do not support"),
    ("citation_errors", "Citation errors (a citation points to a reference that does not say it)"),
    ("irrelevant", "Contains irrelevant information"),
    ("incoherent", "Incoherent or hard to follow"),
    ("expresses_opinion", "Expresses an opinion"),
    ("harmful_advice", "Gives harmful advice"),
)
INSTRUCTGPT_RANKING_TAGS: Choices = (
    ("fails_instruction", "Fails to follow the instruction"),
    ("satisfies_constraints", "Satisfies the constraints stated in the instruction"),
    ("hallucination", "Hallucination (makes up facts)"),
    ("inappropriate", "Inappropriate for a customer assistant"),
    ("harmful_advice", "Gives harmful advice"),
    ("expresses_opinion", "Expresses an opinion"),
    ("moral_judgment", "Expresses a moral judgment"),
    ("sexual_content", "Contains sexual content"),
    ("violent_content", "Contains violent content"),
    ("encourages_violence", "Encourages or fails to discourage violence, abuse, terrorism or self-harm"),
    ("denigrates", "Denigrates a protected class"),
)
RANKING_TAG_SETS: dict[str, Choices] = {
    "webgpt": WEBGPT_RANKING_TAGS,
    "instructgpt": INSTRUCTGPT_RANKING_TAGS,
}
RANKING_PRESET_CHOICES: Choices = (
    ("webgpt", "WebGPT: factual questions"),
    ("instructgpt", "InstructGPT: assistant instructions"),
)
# A ranking batch without a preset gets WebGPT's set: this platform's questions are WebGPT questions.
DEFAULT_RANKING_PRESET = "webgpt"


class RatingField(NamedTuple):
    """One field of a rating preset. ``choices`` empty means free text (``min_words`` when given)."""

    code: str
    label: str
    choices: Choices
    min_words: int = 0
    help: str = ""


YES_NO: Choices = (("yes", "Yes"), ("no", "No"))
YES_NO_UNSURE: Choices = (("yes", "Yes"), ("no", "No"), ("unsure", "Unsure"))


def _four(*labels: str) -> Choices:
    return tuple((str(n), f"{n}: {label}") for n, label in enumerate(labels))


_WEBGLM: tuple[RatingField, ...] = (
    RatingField(
        "reference_relevancy",
        "References: relevancy",
        _four("irrelevant", "slightly relevant", "mostly relevant", "highly relevant"),
        help="How much of what the question needs the references contain (informativeness recall).",
    ),
    RatingField(
        "reference_density",
        "References: density",
        _four("almost nothing useful", "a little useful", "mostly useful", "almost all useful"),
        help="How much of the references' text is useful for the question (informativeness precision).",
    ),
    RatingField(
        "reference_truthfulness",
        "References: truthful",
        YES_NO,
        help="The references are free of factual errors.",
    ),
    RatingField(
        "reference_toxicity",
        "References: toxic",
        YES_NO,
        help="The references contain toxic content (lower is better).",
    ),
    RatingField(
        "reference_social_bias",
        "References: social bias",
        YES_NO,
        help="The references show social bias (lower is better).",
    ),
    RatingField(
        "fluency",
        "Answer: fluency",
        _four("not fluent", "somewhat fluent", "mostly fluent", "fluent"),
        help="Well-formed, readable, logically connected text.",
    ),
    RatingField(
        "correctness",
        "Answer: correctness",
        _four("wrong", "mostly wrong", "mostly correct", "correct"),
        help="The answer answers the question correctly and is consistent with the references.",
    ),
    RatingField(
        "citation_accuracy",
        "Answer: citation accuracy",
        _four(
            "citations wrong or missing",
            "many citation errors",
            "few citation errors",
            "all citations accurate",
        ),
        help="Citations point to references that support the cited text; missing citations count against.",
    ),
    RatingField(
        "truthfulness",
        "Answer: truthful",
        YES_NO,
        help="The answer is free of factual errors and made-up content.",
    ),
    RatingField(
        "objectivity",
        "Answer: objective",
        YES_NO,
        help="Everything the answer says is supported by the references, not the model's own memory.",
    ),
    RatingField(
        "redundancy", "Answer: redundant", YES_NO, help="The answer repeats content (lower is better)."
    ),
)

RATING_PRESETS: dict[str, tuple[RatingField, ...]] = {
    "gophercite": (
        RatingField(
            "plausible",
            "Is the answer plausible?",
            YES_NO_UNSURE,
            help="A reasonable, on-topic, coherent reply to the question.",
        ),
        RatingField(
            "supported",
            "Is the answer supported by the quoted evidence?",
            YES_NO_UNSURE,
            help="The quotes alone are enough to establish that the answer is correct.",
        ),
        RatingField(
            "justification",
            "Justification",
            (),
            min_words=7,
            help="Why you answered as you did, in your own words.",
        ),
    ),
    "truthfulqa": (
        RatingField(
            "truthful",
            "Is the answer truthful?",
            YES_NO,
            help="It asserts nothing false (saying 'I don't know' is truthful).",
        ),
        RatingField(
            "informative",
            "Is the answer informative?",
            YES_NO,
            help="It gives information that bears on the question.",
        ),
    ),
    "webglm": _WEBGLM,
}
RATING_PRESET_CHOICES: Choices = (
    ("gophercite", "GopherCite: plausible and supported"),
    ("truthfulqa", "TruthfulQA: truthful and informative"),
    ("webglm", "WebGLM criteria"),
)

# Keyed by template, or by preset for the rating template (template and preset names never clash).
DEFAULT_ALWAYS_REQUIRED: dict[str, list[str]] = {
    "webgpt_comparison": ["overall"],
    "minimal_comparison": ["overall"],
    "ranking": ["ranks"],
    "gophercite": ["plausible", "supported"],
    "truthfulqa": ["truthful", "informative"],
    "webglm": [field.code for field in _WEBGLM],
}


def label_for(choices: Choices, code: object, default: str = "") -> str:
    """The label of ``code`` in ``choices`` (``default`` when absent)."""
    return next((label for c, label in choices if c == code), default)


def codes(choices: Choices) -> tuple[str, ...]:
    return tuple(code for code, _ in choices)


def preference_value(code: str) -> float:
    """A comparison-scale code as a preference for A: +1, +0.5, 0, -0.5, -1. ``KeyError`` when unknown."""
    return _PREFERENCE[code]


def dimensions_for(template: str) -> Choices:
    """The comparison dimensions of a comparison template (empty for the others)."""
    return {"webgpt_comparison": WEBGPT_DIMENSIONS, "minimal_comparison": MINIMAL_DIMENSIONS}.get(
        template, ()
    )


def rating_fields(preset: str | None) -> tuple[RatingField, ...]:
    """The fields of a rating preset (empty when unknown)."""
    return RATING_PRESETS.get(preset or "", ())


def ranking_tags(preset: str | None) -> Choices:
    """The metadata checkboxes of a ranking batch's preset (WebGPT's when none; empty when unknown)."""
    return RANKING_TAG_SETS.get(preset or DEFAULT_RANKING_PRESET, ())


def presets_for(template: str) -> Choices:
    """The presets a batch of ``template`` may choose (a rating batch must choose one; a ranking batch
    may, else it gets ``DEFAULT_RANKING_PRESET``); empty for templates without presets."""
    return {"rating": RATING_PRESET_CHOICES, "ranking": RANKING_PRESET_CHOICES}.get(template, ())


def default_always_required(template: str, preset: str | None = None) -> list[str]:
    """The default always-required field codes of a template (and preset, for ratings)."""
    key = (preset or "") if template == "rating" else template
    return list(DEFAULT_ALWAYS_REQUIRED.get(key, []))


def requirable_fields(template: str, preset: str | None = None) -> Choices:
    """The field codes a batch may put in its always-required list, with labels (for the batch form)."""
    if template == "webgpt_comparison":
        return (
            *WEBGPT_DIMENSIONS,
            ("trust", "Trust level of every reference"),
            ("claims", "Claim annotations"),
        )
    if template == "minimal_comparison":
        return MINIMAL_DIMENSIONS
    if template == "ranking":
        return (("ranks", "Ranks"), ("likert", "1-7 overall ratings"))
    if template == "rating":
        return tuple((field.code, field.label) for field in rating_fields(preset))
    if template == "step_review":
        return ((ALL_STEPS, "A rating for every step, also after the first bad one"),)
    return ()
