"""From the task page's form fields to a response (and back, for drafts)."""

from __future__ import annotations

from typing import Any

from django.http import QueryDict

from annotation.feedback.scales import QUESTION_FLAGS, codes, dimensions_for, rating_fields
from annotation.feedback.step_presenter import step_response_from_post
from core.inputs import JSONInputError, loads


def response_from_post(
    template: str, preset: str, post: QueryDict, slots: list[str], quote_counts: list[int]
) -> dict:
    """The response as the validator expects it; malformed pieces are passed on for it to explain (the
    views run ``validation.input_errors`` on the result, as the API does on its bodies)."""
    if template == "step_review":
        return step_response_from_post(post)
    if template == "step_preference":
        return {key: post.get(key, "") for key in ("preference", "reason", "comment")}
    response: dict[str, Any] = {"comment": post.get("comment", "")}
    if template in ("webgpt_comparison", "minimal_comparison"):
        response["ratings"] = {
            dim: post[f"rating-{dim}"] for dim in codes(dimensions_for(template)) if post.get(f"rating-{dim}")
        }
    if template == "webgpt_comparison":
        response["flags"] = {flag: post.get(f"flag-{flag}") == "on" for flag in codes(QUESTION_FLAGS)}
        response["answers"] = {
            slot: {
                "trust": {
                    str(index): post[f"trust-{slot}-{index}"]
                    for index in range(count)
                    if post.get(f"trust-{slot}-{index}")
                },
                "claims": _json_list(post.get(f"claims-{slot}", "")),
            }
            for slot, count in zip(slots, quote_counts, strict=True)
        }
    elif template == "ranking":
        response["ranks"] = {slot: post[f"rank-{slot}"] for slot in slots if post.get(f"rank-{slot}")}
        response["likert"] = {slot: post[f"likert-{slot}"] for slot in slots if post.get(f"likert-{slot}")}
        response["tags"] = {slot: post.getlist(f"tag-{slot}") for slot in slots}
    elif template == "rating":
        for field in rating_fields(preset):
            if post.get(f"field-{field.code}"):
                response[field.code] = post[f"field-{field.code}"]
    return response


def _json_list(raw: str) -> Any:
    if not raw.strip():
        return []
    try:
        return loads(raw)
    except JSONInputError:  # also too deep: never a RecursionError
        return raw  # the validator reports it
