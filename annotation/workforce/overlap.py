"""Adaptive overlap: an item whose judgements disagree asks for one more, up to the batch's ``max_overlap``.

When an item of a batch with ``max_overlap`` set has its target number of submitted judgements
(``FeedbackItem.target_overlap``: the batch's overlap plus those already asked for) and they disagree, its
``extra_overlap`` goes up by one and it opens again, so "Next task" hands it to one more labeler (never one
who had it before: ``assignment.eligible_items`` leaves out anyone with an assignment on the item, whatever
became of it, and the one-assignment-per-labeler-and-item constraint backs that up).

They disagree when
- comparisons: the preferences are split without a majority: as many prefer one answer as the other, and
  at least one does (a tie, "equally good", takes no side; a judgement without a preference, a flagged
  question, says nothing). Two opposite judgements ask for a third, which breaks the tie; 2 against 1
  settles the item;
- rankings: the mean Kendall tau-b over the pairs of rankings, over the answers both ranked, is under the
  batch's ``rank_agreement_threshold`` (a ranking that ties every answer has no tau and says nothing).
Ratings never ask for more (they have no preference to disagree on), nor do screening tests (every
applicant does every item), gold items (their reference settles a disagreement) or judgements a
researcher excluded on flag review.

After an extra judgement the item is read again the same way, so it asks for another only while the split
stays even (or the mean tau low), up to ``max_overlap``, the cap on what one item may cost. A revision
that resolves a disagreement never shrinks the target back: the extra labeler may already hold the item,
and their judgement is as good as the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

from annotation.feedback.agreement import preference_agreement
from annotation.feedback.scales import COMPARISON_TEMPLATES
from annotation.models import (
    Assignment,
    AssignmentStatus,
    FeedbackBatch,
    FeedbackItem,
    FlagDecision,
    Template,
)
from annotation.workforce.judgements import FIRST_BAD, PREFERENCE, canonical
from core.models import log_action

Ranking = Mapping[str, float]


def kendall_tau_b(first: Ranking, second: Ranking) -> float | None:
    """Kendall's tau-b of two rankings (answer -> rank, ties allowed) over the answers both ranked:

        tau_b = (C - D) / sqrt((P - T1) * (P - T2))

    with C and D the concordant and discordant pairs of answers, P all pairs, T1 and T2 the pairs tied in
    the first and in the second ranking. None when either ranking ties every pair (or fewer than two
    answers are shared): such a ranking orders nothing to agree or disagree with."""
    common = sorted(set(first) & set(second))
    pairs = concordant = discordant = tied_first = tied_second = 0
    for u, v in combinations(common, 2):
        pairs += 1
        x, y = first[u] - first[v], second[u] - second[v]
        tied_first += x == 0
        tied_second += y == 0
        if x * y > 0:
            concordant += 1
        elif x * y < 0:
            discordant += 1
    denominator = math.sqrt((pairs - tied_first) * (pairs - tied_second))
    return (concordant - discordant) / denominator if denominator else None


def preferences_disagree(preferences: Sequence[float]) -> bool:
    """Whether preferences (for the same answer) are split evenly between the two answers, some taking a
    side; ties take none."""
    for_first = sum(1 for value in preferences if value > 0 and preference_agreement(value, 0.0) == 0.5)
    for_second = sum(1 for value in preferences if value < 0 and preference_agreement(value, 0.0) == 0.5)
    return for_first == for_second > 0


def rankings_disagree(rankings: Sequence[Ranking], threshold: float) -> bool:
    """Whether the mean Kendall tau-b over the pairs of rankings is under ``threshold``."""
    taus = [tau for a, b in combinations(rankings, 2) if (tau := kendall_tau_b(a, b)) is not None]
    return bool(taus) and sum(taus) / len(taus) < threshold


def judgements_disagree(batch: FeedbackBatch, tasks: Sequence[Assignment]) -> bool:
    """Whether ``tasks`` (submitted judgements of one item) disagree, by the rules above."""
    judgements = [canonical(batch.template, task.response, task.order, batch.preset) for task in tasks]
    if batch.template in (*COMPARISON_TEMPLATES, "step_preference"):
        return preferences_disagree([float(j[PREFERENCE]) for j in judgements if PREFERENCE in j])
    if batch.template == "step_review":  # where the first mistake is: every labeler the same step, or not
        return len({j.get(FIRST_BAD) for j in judgements}) > 1
    if batch.template == Template.RANKING:
        rankings = [{k: float(v) for k, v in j["ranks"].items()} for j in judgements]
        return rankings_disagree(rankings, batch.rank_agreement_threshold)
    return False


def takes_adaptive_overlap(batch: FeedbackBatch) -> bool:
    """Whether the batch may ask for more judgements than its overlap."""
    return batch.max_overlap is not None and not batch.is_screening and batch.template != Template.RATING


def ask_more_on_disagreement(task: Assignment) -> bool:
    """After a submitted judgement, in the submit's transaction (the caller holds the assignment's lock;
    the item's is taken next, in the house's order): ask for one more judgement of its item when its
    judgements disagree and it is under ``max_overlap``. True when it asked."""
    batch = task.item.batch
    if not takes_adaptive_overlap(batch) or task.item.is_gold:
        return False
    item = FeedbackItem.objects.select_for_update().get(pk=task.item_id)
    item.batch = batch
    if item.target_overlap >= batch.max_overlap:
        return False
    submitted = list(Assignment.objects.filter(item=item, status=AssignmentStatus.SUBMITTED).order_by("id"))
    if len(submitted) < item.target_overlap:
        return False
    kept = [judged for judged in submitted if judged.flag_decision != FlagDecision.EXCLUDE]
    if not judgements_disagree(batch, kept):
        return False
    item.extra_overlap += 1
    item.is_open = item.slots_taken < item.target_overlap  # slots.has_room, for a batch not screening
    item.save(update_fields=["extra_overlap", "is_open"])
    log_action(None, "feedback_item.extra_overlap", item, target=item.target_overlap, after=task.pk)
    return True
