"""Experiment reports as the console page, the API and ``run_experiment`` make them: one check (a name, at
least one policy, each a policy some finished sampling run stands for, none twice), the row, the audit
log. Nothing here runs anything: a report reads what the runs left (``experiments``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.models import log_action
from training.errors import RunError
from training.evaluation.experiments import PolicyKey, available_policies
from training.models import Experiment

MAX_POLICIES = 8  # the palette's colours: more could not be told apart on a chart


def check_experiment(name: str, policies: Sequence[Any]) -> list[PolicyKey]:
    """The policies as keys, or RunError naming the input at fault."""
    if not name.strip():
        raise RunError("give the report a name", "name")
    if not policies:
        raise RunError("choose at least one policy", "policies")
    if len(policies) > MAX_POLICIES:
        raise RunError(f"at most {MAX_POLICIES} policies (a chart's colours)", "policies")
    try:
        keys = [policy if isinstance(policy, PolicyKey) else PolicyKey.read(policy) for policy in policies]
    except ValueError as exc:
        raise RunError(str(exc), "policies") from None
    if len(set(keys)) != len(keys):
        raise RunError("a policy is named twice", "policies")
    known = set(available_policies())
    if missing := [key.label for key in keys if key not in known]:
        raise RunError(f"no finished sampling run of {', '.join(missing)}", "policies")
    return keys


def create_experiment(
    user: Any, name: str, policies: Sequence[Any], notes: str = "", source: str = ""
) -> Experiment:
    keys = check_experiment(name, policies)
    experiment = Experiment.objects.create(
        name=name.strip()[:200],
        notes=notes,
        policies=[key.stored() for key in keys],
        source=source,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    log_action(user, "experiment.create", experiment, policies=len(keys))
    return experiment
