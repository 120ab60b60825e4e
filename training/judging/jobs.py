"""The judge job, run by a worker on the ``sampling`` queue: the batch's first ``limit`` items (by id), each
asked in both orders (the order drawn from the run's seed and the item, then its reverse), stored as two
``ModelJudgement`` rows per item in one transaction; then, where asked, the claim checks of the batch's
submitted WebGPT comparisons. Progress (items done of the total, an estimate of the time left), the
cancel flag and the log go through the run's row (core.jobs.runner: whatever happens the row ends
done, cancelled or failed with the reason).

Resume-safe: what is stored is whole (an item's two judgements commit together, each claim check on its
own), and a job skips whatever its run already has, so running a run's job again only adds what is
missing. An unreadable output is a stored judgement with its error, never a failure; only a judge that
cannot answer at all (an endpoint down after its retries, a deleted model) fails the run."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.conf import settings
from django.db import transaction

from annotation.feedback.validation import AnswerShape
from annotation.judging.routing import route_batch, routing_counts
from annotation.judging.verdicts import run_verdicts, verdict_counts
from annotation.models import Answer, Assignment, AssignmentStatus, FeedbackItem
from annotation.models.judging import ClaimCheck, ClaimSupport, JudgeKind, JudgeRun, ModelJudgement
from core.jobs.runner import run_job
from core.progress import Every, estimated_end
from training.checkpoints import local_folder
from training.judging.claims import (
    CLAIM_CHECK_V1,
    SUPPORT_SCHEMA,
    Claim,
    claim_messages,
    claims_of,
    read_support,
)
from training.judging.judges import Ask, EndpointJudge, RewardJudge, derived_seed
from training.judging.outputs import ReadOutput
from training.judging.prompts import shown_item, slot_names
from training.models import RunStatus as Status
from training.sampling.endpoint import EndpointBackend
from training.sampling.endpoints import backend_from
from training.sampling.types import BackendError, CompletionRequest, JsonSchema

CHUNK_ITEMS = 4  # items judged between two progress writes and cancel checks (8 requests in flight)
CLAIM_CHUNK = 8


def run_judge_job(run_id: int, echo: Callable[[JudgeRun], None] | None = None) -> JudgeRun:
    """The worker's job (``echo`` is told about progress, for the command's progress bar)."""

    def execute(run: JudgeRun) -> JudgeRun:
        run.keep_on_failure(lambda: {"metrics": metrics(run), "items_done": _items_done(run)})
        status = _execute(run, echo or (lambda run: None))
        return run.finish(status, metrics=metrics(run), items_done=_items_done(run))

    return run_job(
        JudgeRun,
        run_id,
        execute,
        related=("batch", "reward_model"),
        expected=(BackendError, ValueError, OSError),
    )


def _execute(run: JudgeRun, echo: Callable[[JudgeRun], None]) -> str:
    items = _items(run)
    run.append_log(f"Loading the judge {run.judge_name}")
    judge = _load_judge(run)
    stored = set(ModelJudgement.objects.filter(run=run).values_list("item_id", "swapped"))
    done = sum(_both(stored, item.pk) for item in items)
    JudgeRun.objects.filter(pk=run.pk).update(items_total=len(items), items_done=done)
    run.items_total, run.items_done = len(items), done
    if done:
        run.append_log(f"{done} item(s) already judged by this run: kept, not asked again")
    run.append_log(f"Judging {len(items) - done} item(s) of batch {run.batch_id} in both orders")
    started, saves, made = time.monotonic(), Every(), 0
    for start in range(0, len(items), CHUNK_ITEMS):
        fresh = [item for item in items[start : start + CHUNK_ITEMS] if not _both(stored, item.pk)]
        asks = [ask for item in fresh for ask in _asks(run, item) if (item.pk, ask.swapped) not in stored]
        if asks:
            _store(run, asks, judge.judge(asks))
        run.items_done += len(fresh)
        made += len(fresh)
        if run.items_done < len(items) and saves.due():
            end = estimated_end(made, len(items) - run.items_done, time.monotonic() - started)
            JudgeRun.objects.filter(pk=run.pk).update(items_done=run.items_done, estimated_end_at=end)
            echo(run)
            if run.cancel_was_requested():
                run.append_log(f"Cancelled: kept the judgements of {run.items_done} of {len(items)} items")
                return Status.CANCELLED
    JudgeRun.objects.filter(pk=run.pk).update(items_done=run.items_done)
    echo(run)
    counted = metrics(run)
    run.append_log(
        f"{counted['judged']} item(s) judged: {counted['unreadable']} unreadable output(s), "
        f"{counted['consistent']} of {counted['both_orders']} the same in both orders"
    )
    if run.route:
        # While the run is still running it holds the batch from labelers (routing.holding_runs): the
        # judge's items are closed before anyone can take them.
        paths = route_batch(run)
        run.append_log("Routed: " + ", ".join(f"{count} item(s) to {path}" for path, count in paths.items()))
    if run.settings.get("check_claims"):
        return _check_claims(run, items)
    return Status.DONE


def _both(stored: set[tuple[int, bool]], item_id: int) -> bool:
    return (item_id, False) in stored and (item_id, True) in stored


def _items(run: JudgeRun) -> list[FeedbackItem]:
    limit = int(run.settings.get("limit", run.items_total or 1))
    found = run.batch.items.select_related("question").prefetch_related("answers").order_by("id")
    return list(found[:limit])


def _load_judge(run: JudgeRun) -> RewardJudge | EndpointJudge:
    if run.judge_kind == JudgeKind.REWARD_MODEL:
        if run.reward_model is None:
            raise ValueError(f"the reward model {run.judge_name} was deleted from the registry")
        # torch: loaded in the worker only, not in every process that imports this module
        from training.runs.runtime import set_threads
        from training.sampling.best_of_n import RewardScorer

        set_threads(settings.SAMPLING_THREADS)
        scorer = RewardScorer(local_folder(run.reward_model))  # downloaded once per worker, if need be
        return RewardJudge(scorer, run.settings["tie_margin"], run.settings["much_margin"])
    return EndpointJudge(
        _endpoint(run),
        run.prompt_version,
        temperature=run.settings["temperature"],
        max_tokens=run.settings["max_tokens"],
        seed=run.settings["seed"],
    )


def _endpoint(run: JudgeRun) -> EndpointBackend:
    endpoint = settings.SAMPLING_ENDPOINTS.get(run.endpoint)
    if endpoint is None:
        raise ValueError(f"the endpoint {run.endpoint!r} is no longer configured (SAMPLING_ENDPOINTS)")
    return backend_from(endpoint)


def drawn_order(answer_ids: Sequence[int], seed: int, item_id: int) -> list[int]:
    """The order an item's answers are first shown in: shuffled, as a labeler's task draws it, from a
    generator seeded by the run's seed and the item (the same run always draws the same)."""
    order = sorted(answer_ids)
    random.Random(derived_seed(seed, item_id, "order")).shuffle(order)  # noqa: S311 (not security)
    return order


def _asks(run: JudgeRun, item: FeedbackItem) -> list[Ask]:
    batch = run.batch
    answers = {answer.pk: answer for answer in item.answers.all()}
    first = drawn_order(list(answers), run.settings.get("seed", 0), item.pk)
    asks = []
    for swapped, order in ((False, first), (True, first[::-1])):
        shown = [answers[pk] for pk in order]
        slots = slot_names(len(shown), batch.template)
        asks.append(
            Ask(
                item_id=item.pk,
                swapped=swapped,
                order=tuple(order),
                shown=shown_item(
                    batch.template, batch.preset, item.question.text, [(a.text, a.quotes) for a in shown]
                ),
                shapes=tuple(
                    AnswerShape(slot, len(answer.text), len(answer.quotes))
                    for slot, answer in zip(slots, shown, strict=True)
                ),
                always_required=tuple(batch.always_required or ()),
                quotes=tuple(tuple(answer.quotes) for answer in shown),
                texts=tuple(answer.text for answer in shown),
            )
        )
    return asks


def _store(run: JudgeRun, asks: Sequence[Ask], verdicts: Sequence[ReadOutput]) -> None:
    """Each item's judgements in one transaction: an item is judged in both orders or not at all."""
    by_item: dict[int, list[tuple[Ask, ReadOutput]]] = {}
    for ask, verdict in zip(asks, verdicts, strict=True):
        by_item.setdefault(ask.item_id, []).append((ask, verdict))
    for item_id, pairs in by_item.items():
        with transaction.atomic():
            for ask, verdict in pairs:
                ModelJudgement.objects.create(
                    run=run,
                    item_id=item_id,
                    swapped=ask.swapped,
                    order=list(ask.order),
                    response=verdict.response,
                    raw_output=verdict.raw_output,
                    error=verdict.error,
                    confidence=verdict.confidence,
                    details=verdict.details,
                )


def _items_done(run: JudgeRun) -> int:
    """Items with both orders stored."""
    orders = ModelJudgement.objects.filter(run=run).values_list("item_id", flat=True)
    counts: dict[int, int] = {}
    for item_id in orders:
        counts[item_id] = counts.get(item_id, 0) + 1
    return sum(count == 2 for count in counts.values())


def metrics(run: JudgeRun) -> dict[str, Any]:
    """The counts the run page and the API show: judgements stored and unreadable outputs; items judged,
    read in both orders, the same in both (``consistent``: their verdict counts) and flipped with the order
    (``annotation.judging.verdicts``, the results page's own reading); the claim checks."""
    rows = ModelJudgement.objects.filter(run=run)
    found = {
        "judgements": rows.count(),
        "unreadable": rows.filter(response__isnull=True).count(),
        **verdict_counts(run_verdicts(run)),
    }
    if run.route:
        found["routing"] = routing_counts(run)
    if run.settings.get("check_claims"):
        checks = ClaimCheck.objects.filter(run=run)
        found["claims_checked"] = checks.count()
        found["claims_unreadable"] = checks.filter(support="").count()
        for level in ClaimSupport.values:
            found[f"claims_{level}"] = checks.filter(support=level).count()
    return found


def _check_claims(run: JudgeRun, items: Sequence[FeedbackItem]) -> str:
    """Every claim of the items' submitted comparisons checked once (those already checked are kept)."""
    claims = list(_claims(run, items))
    done = set(ClaimCheck.objects.filter(run=run).values_list("assignment_id", "slot", "claim"))
    todo = [claim for claim in claims if (claim.assignment_id, claim.slot, claim.index) not in done]
    run.append_log(f"Checking {len(todo)} claim(s) of the batch's submitted comparisons against their quotes")
    backend, schema = _endpoint(run), JsonSchema("support", SUPPORT_SCHEMA)
    for start in range(0, len(todo), CLAIM_CHUNK):
        if run.cancel_was_requested():
            run.append_log(f"Cancelled: {start} of {len(todo)} claim(s) checked")
            return Status.CANCELLED
        chunk = todo[start : start + CLAIM_CHUNK]
        requests = [
            CompletionRequest(
                max_new_tokens=run.settings["max_tokens"],
                temperature=run.settings["temperature"],
                seed=derived_seed(run.settings["seed"], claim.assignment_id, claim.slot, claim.index),
                messages=claim_messages(claim),
                json_schema=schema,
            )
            for claim in chunk
        ]
        for claim, completion in zip(chunk, backend.complete(requests), strict=True):
            support, error = read_support(completion.text)
            ClaimCheck.objects.create(
                run=run,
                assignment_id=claim.assignment_id,
                slot=claim.slot,
                claim=claim.index,
                support=support,
                raw_output=completion.text,
                error=error,
            )
    run.append_log(f"{len(todo)} claim(s) checked ({CLAIM_CHECK_V1})")
    return Status.DONE


def _claims(run: JudgeRun, items: Sequence[FeedbackItem]) -> Iterator[Claim]:
    tasks = (
        Assignment.objects.filter(item__in=items, status=AssignmentStatus.SUBMITTED)
        .select_related("item__question")
        .order_by("id")
    )
    tasks = list(tasks)
    answers = Answer.objects.in_bulk([pk for task in tasks for pk in task.order if isinstance(pk, int)])
    for task in tasks:
        shown = [(answers[pk].text, answers[pk].quotes) for pk in task.order if pk in answers]
        yield from claims_of(task.pk, task.item.question.text, task.response, shown)
