"""What a step-review task page shows (issue 38; a step preference's: ``preference_context``): the episode
replayed as the model saw it, step by step (the observation text before each action, the action, what the
browser answered), the answer it wrote with its quotes, and the labeler's ratings filled in from the draft.
Who browsed (a demonstrator or a model, which one) is never shown: blinding, as answers' sources are not."""

from __future__ import annotations

from typing import Any

from annotation.feedback.scales import COMPARISON_SCALE, COMPARISON_SLOTS, codes
from annotation.feedback.steps import STEP_RATINGS, STEP_REASONS
from annotation.models import Episode, EpisodeAction

STEP_FIELDS = ("index", "command", "valid", "message", "observation_before")


def section(values: Any, key: str) -> dict:
    """A part of a stored draft, or {} when it is missing or not an object (drafts are stored as sent)."""
    part = values.get(key) if isinstance(values, dict) else None
    return part if isinstance(part, dict) else {}


def episode_steps(episode_id: int) -> list[EpisodeAction]:
    """The actions a step review rates, in order (one query)."""
    return list(EpisodeAction.objects.filter(episode_id=episode_id).only(*STEP_FIELDS).order_by("index"))


def step_context(episode: Episode, values: Any, errors: dict[str, str]) -> dict[str, Any]:
    """The page's steps (numbered from 1 for people, keyed by index), the first-bad-step choices, and the
    episode's answer and quotes; ``values``: the draft or the response."""
    drafts = section(values, "steps")
    steps = []
    for action in episode_steps(episode.pk):
        draft = drafts.get(str(action.index))
        draft = draft if isinstance(draft, dict) else {}
        key = f"steps.{action.index}"
        steps.append(
            {
                "index": action.index,
                "number": action.index + 1,
                "observation": action.observation_before,
                "command": action.command,
                "valid": action.valid,
                "message": action.message,
                "ratings": [
                    {"code": code, "label": label, "checked": draft.get("rating") == code}
                    for code, label in STEP_RATINGS
                ],
                "reasons": [
                    {"code": code, "label": label, "selected": draft.get("reason") == code}
                    for code, label in STEP_REASONS
                ],
                "note": draft.get("note", "") if isinstance(draft.get("note"), str) else "",
                "errors": [
                    message for path, message in errors.items() if path == key or path.startswith(key + ".")
                ],
            }
        )
    first_bad = values.get("first_bad") if isinstance(values, dict) else None
    return {
        "steps": steps,
        "first_bad_options": [
            {
                "value": str(step["index"]),
                "label": f"Step {step['number']}",
                "selected": str(first_bad) == str(step["index"]),
            }
            for step in steps
        ],
        "episode_answer": episode.answer,
        "episode_quotes": [
            {key: quote.get(key, "") for key in ("title", "url", "domain", "extract")}
            for quote in (episode.state or {}).get("quotes", [])
            if isinstance(quote, dict)
        ],
        "step_keys": len(codes(STEP_RATINGS)),
    }


def step_response_from_post(post: Any) -> dict[str, Any]:
    """A step review's response from the page's fields (``step-N-rating``, ``step-N-reason``,
    ``step-N-note``, ``first_bad``); malformed pieces are passed on for the check to explain."""
    steps: dict[str, dict[str, str]] = {}
    for name in post:
        parts = name.split("-")
        if len(parts) == 3 and parts[0] == "step" and parts[2] in ("rating", "reason", "note"):
            value = post.get(name, "")
            if value:
                steps.setdefault(parts[1], {})[parts[2]] = value
    return {"steps": steps, "first_bad": post.get("first_bad", ""), "comment": post.get("comment", "")}


def preference_context(item: Any, values: Any) -> dict[str, Any]:
    """A step-preference page: the episode's actions before the state, the observation there (as the
    model saw it), the two candidate next actions as A and B, the scale and the reasons with the draft's
    choices. Which candidate the episode took is never shown."""
    index = int(item.step.get("index", 0))
    actions = list(
        EpisodeAction.objects.filter(episode_id=item.episode_id, index__lte=index)
        .only("index", "command", "observation_before")
        .order_by("index")
    )
    here = actions[-1] if actions and actions[-1].index == index else None
    values = values if isinstance(values, dict) else {}
    return {
        "state_number": index + 1,
        "state_index": index,
        "previous_actions": [action.command for action in actions if action.index < index],
        "state_observation": here.observation_before if here else "",
        "candidates": [
            {"slot": slot, "action": action}
            for slot, action in zip(COMPARISON_SLOTS, item.step.get("candidates", ()), strict=False)
        ],
        "preference_options": [
            {"code": code, "label": label, "checked": values.get("preference") == code}
            for code, label in COMPARISON_SCALE
        ],
        "reason_options": [
            {"code": code, "label": label, "selected": values.get("reason") == code}
            for code, label in STEP_REASONS
        ],
    }
