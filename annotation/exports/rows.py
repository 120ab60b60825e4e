"""The rows of each export format, read from the database as streams (server-side cursors, constant
memory). Which judgements count: submitted ones (``AssignmentStatus.SUBMITTED``), and late ones only when
the request includes them; skipped, expired and leased ones never reach a dataset. Screening tests are
tests, not data: their judgements and demonstrations never do either, nor a person's work of a kind
first submitted before ``Qualification.work_excluded_before`` for that kind (set on a revocation)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import (
    Count,
    Exists,
    F,
    IntegerField,
    JSONField,
    OuterRef,
    QuerySet,
    Subquery,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Greatest, Least

from annotation.demonstrations.training_data import bc_examples
from annotation.exports.formats import answer_prompt, rm_pair, score_for_first, webgpt_pair, webgpt_row
from annotation.feedback.scales import COMPARISON_TEMPLATES, STEP_TEMPLATES
from annotation.feedback.steps import preference_row, rating_rows
from annotation.models import (
    Answer,
    Assignment,
    AssignmentStatus,
    Episode,
    EpisodeAction,
    EpisodeKind,
    EpisodeStatus,
    ExportFormat,
    FeedbackBatch,
    FlagDecision,
    ImportedComparison,
    ModelJudgement,
    Qualification,
    Split,
)
from annotation.models.workforce import DEMONSTRATION
from annotation.workforce.excluded import without_excluded_work
from browser.engine.browser import removed_quote_actions
from browser.engine.trajectory import model_commands

CHUNK = 2000
Judged = TypeVar("Judged", Assignment, ModelJudgement)  # a judgement: of an item, by a labeler or a judge


def pseudonym(user_id: int) -> str:
    """A stable labeler id that does not reveal the account (keyed with the deployment's secret)."""
    return hashlib.sha256(f"{settings.SECRET_KEY}:labeler:{user_id}".encode()).hexdigest()[:12]


# The filters that narrow judgements to one value (None or empty: any).
_LOOKUPS = {
    "batch": "item__batch_id",
    "split": "item__question__split",
    "template": "item__batch__template",
    "labeler": "labeler__username",
    "since": "submitted_at__date__gte",
    "until": "submitted_at__date__lte",
}


def submitted_judgements(filters: dict[str, Any]) -> QuerySet[Assignment]:
    """Submitted assignments matching the export filters: batch, question split, template, labeler (user
    name), submitted since/until (ISO dates, inclusive), and whether flagged, gold and late ones are
    included. Only SUBMITTED counts, and LATE when asked: any other status, present or future, never does.
    A judgement a researcher excluded on flag review (``flag_review``) never counts, whatever the filters."""
    statuses = [AssignmentStatus.SUBMITTED]
    if filters.get("include_late"):  # stored after the slot went to someone else: an extra judgement
        statuses.append(AssignmentStatus.LATE)
    lookups = {name: value for name, value in filters.items() if value and name in _LOOKUPS}
    tasks = Assignment.objects.filter(
        status__in=statuses, **{_LOOKUPS[name]: value for name, value in lookups.items()}
    ).exclude(flag_decision=FlagDecision.EXCLUDE)
    if not filters.get("include_flagged", True):
        tasks = tasks.filter(flags=[])
    if not filters.get("include_gold", True):
        tasks = tasks.filter(item__is_gold=False)
    if filters.get("exclude_eval"):
        tasks = tasks.exclude(item__question__split=Split.EVAL)
    return _in_rounds(_work_that_is_data(tasks), filters)


def _work_that_is_data(tasks: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """Leave out screening tests' judgements and the work a revocation excluded (``excluded``)."""
    return without_excluded_work(tasks.filter(item__batch__is_screening=False))


def with_overlap(tasks: QuerySet[Assignment]) -> QuerySet[Assignment]:
    """Each judgement with its item's final overlap (``overlap``: the item's SUBMITTED judgements, as the
    batch's pages count them) and ``target_overlap`` (the batch's overlap plus those asked for on
    disagreement: ``workforce.overlap``)."""
    judged = (
        Assignment.objects.filter(item_id=OuterRef("item_id"), status=AssignmentStatus.SUBMITTED)
        .values("item_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return tasks.annotate(
        overlap=Subquery(judged, output_field=IntegerField()),
        target_overlap=F("item__batch__overlap") + F("item__extra_overlap"),
    )


def _in_rounds(tasks: QuerySet[Judged], filters: dict[str, Any]) -> QuerySet[Judged]:
    """The round filters (round numbers): ``round_only``, the batches made from the round's sampling runs;
    ``up_to_round``, every batch but those made only from the runs of later rounds (a batch of two runs
    belongs to the earlier one's round). Subqueries on the batch, so a batch of two runs in one round does
    not count its judgements twice."""
    if filters.get("round_only") is not None:
        own = FeedbackBatch.objects.filter(sampling_runs__rounds__number=filters["round_only"])
        tasks = tasks.filter(item__batch__in=own.values("pk"))
    if filters.get("up_to_round") is not None:
        number = filters["up_to_round"]
        later = FeedbackBatch.objects.filter(sampling_runs__rounds__number__gt=number).exclude(
            sampling_runs__rounds__number__lte=number
        )
        tasks = tasks.exclude(item__batch__in=later.values("pk"))
    return tasks


def _submitted_comparisons(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Submitted pairwise judgements as plain values with both answers joined in the same query, lower id
    first (answer 0 of the WebGPT schema). One streamed query (a server-side cursor on PostgreSQL) and no
    model objects: this is the hot loop of every comparison export."""
    tasks = with_overlap(submitted_judgements(filters).filter(item__batch__template__in=COMPARISON_TEMPLATES))
    ids = [Cast(KT(f"order__{i}"), IntegerField()) for i in (0, 1)]
    tasks = tasks.annotate(first_id=Least(*ids), second_id=Greatest(*ids))
    for key in ("first", "second"):
        # Correlated lookups by primary key (index probes), so the rows come joined in one streamed query.
        answer = Answer.objects.filter(pk=OuterRef(f"{key}_id"))
        tasks = tasks.annotate(
            **{
                f"{key}_text": Subquery(answer.values("text")),
                f"{key}_quotes": Subquery(answer.values("quotes"), output_field=JSONField()),
            }
        )
    values = tasks.order_by("id").values(
        "pk",
        "order",
        "response__ratings__overall",
        "item__question_id",
        "item__question__dataset",
        "item__question__text",
        "item__question__external_id",
        "first_id",
        "first_text",
        "first_quotes",
        "second_id",
        "second_text",
        "second_quotes",
        "overlap",
        "target_overlap",
    )
    return values.iterator(chunk_size=CHUNK)


def _question(item_question: Any) -> dict[str, Any]:
    return {
        "dataset": item_question.dataset,
        "full_text": item_question.text,
        "id": item_question.external_id or str(item_question.pk),
    }


def _comparison_rows(filters: dict[str, Any], pairs: bool = False, rm: bool = False) -> Iterator[Any]:
    """Platform judgements (source "platform") then imported ones ("imported"), unless filtered."""
    if _wants(filters, "platform"):
        yield from _platform_comparison_rows(filters, pairs, rm)
    if _wants(filters, "imported"):
        yield from _imported_comparison_rows(filters, pairs, rm)


def _wants(filters: dict[str, Any], source: str) -> bool:
    return (filters.get("source") or "both") in ("both", source)


# Filters that only our own judgements can match: an imported comparison is in no batch, has no labeler here
# and was judged under no template of ours, so an export narrowed by one of them holds none.
_PLATFORM_ONLY = ("batch", "labeler", "template", "round_only")


def _imported_comparisons(filters: dict[str, Any]) -> QuerySet[ImportedComparison]:
    rows = ImportedComparison.objects.order_by("id")
    if any(filters.get(name) for name in _PLATFORM_ONLY):
        return rows.none()
    if filters.get("split"):
        rows = rows.filter(question__split=filters["split"])
    if filters.get("exclude_eval"):
        rows = rows.exclude(question__split=Split.EVAL)
    return rows


def _imported_comparison_rows(filters: dict[str, Any], pairs: bool, rm: bool) -> Iterator[Any]:
    rows = _imported_comparisons(filters).select_related("question", "answer_0", "answer_1")
    for comparison in rows.iterator(chunk_size=CHUNK):
        first = {"text": comparison.answer_0.text, "quotes": comparison.answer_0.quotes}
        second = {"text": comparison.answer_1.text, "quotes": comparison.answer_1.quotes}
        if rm:
            score = comparison.score_0
            ids = {
                "imported": comparison.pk,
                "answer_chosen": (comparison.answer_0_id if score >= 0 else comparison.answer_1_id),
                "answer_rejected": (comparison.answer_1_id if score >= 0 else comparison.answer_0_id),
                "question_id": comparison.question_id,
            }
            yield rm_pair(comparison.question.text, first, second, score, ids)
        elif pairs:
            yield webgpt_pair(_question(comparison.question), first, second, comparison.score_0)
        else:
            yield {
                **webgpt_row(_question(comparison.question), first, second, comparison.score_0),
                "source": "imported",
            }


def _platform_comparison_rows(filters: dict[str, Any], pairs: bool, rm: bool) -> Iterator[Any]:
    for task in _submitted_comparisons(filters):
        overall = task["response__ratings__overall"]
        if not _carries_preference(task["order"], overall):
            continue
        first = {"text": task["first_text"], "quotes": task["first_quotes"]}
        second = {"text": task["second_text"], "quotes": task["second_quotes"]}
        score = score_for_first(task["order"], overall)
        if rm:
            ids_row = {
                "assignment": task["pk"],
                "answer_chosen": task["first_id"] if score >= 0 else task["second_id"],
                "answer_rejected": task["second_id"] if score >= 0 else task["first_id"],
                "question_id": task["item__question_id"],
                "overlap": task["overlap"],
                "target_overlap": task["target_overlap"],
            }
            yield rm_pair(task["item__question__text"], first, second, score, ids_row)
            continue
        question = {
            "dataset": task["item__question__dataset"],
            "full_text": task["item__question__text"],
            "id": task["item__question__external_id"] or str(task["item__question_id"]),
        }
        if pairs:
            yield webgpt_pair(question, first, second, score)
        else:
            yield {**webgpt_row(question, first, second, score), "source": "platform"}


def _carries_preference(order: list[int], overall: Any) -> bool:
    """Whether a pairwise judgement is a preference: flagged questions ("nonsense") carry none."""
    return overall is not None and len(order) == 2


def _ranked(order: list[int], ranks: dict[str, int] | None) -> list[tuple[int, int]]:
    """(rank, answer id) of each answer the labeler ranked, in the order shown (ranks by 1-based slot)."""
    ranks = ranks or {}
    return [(ranks[str(slot)], pk) for slot, pk in enumerate(order, start=1) if str(slot) in ranks]


def row_questions(export_format: str, filters: dict[str, Any]) -> Iterator[int]:
    """The question id of each row an ``rm-pairs`` or ``rm-groups`` export would write, read without the
    answers' texts (a few ints a row): what a page counts before anyone asks for the export, with the rows'
    own rules (``_carries_preference``, ``_ranked``) so the count is the export's."""
    if export_format == ExportFormat.RM_GROUPS:
        tasks = submitted_judgements(filters).filter(item__batch__template="ranking")
        values = tasks.values_list("order", "response__ranks", "item__question_id")
        for order, ranks, question in values.iterator(chunk_size=CHUNK):
            if len(_ranked(order, ranks)) >= 2:
                yield question
        return
    if export_format != ExportFormat.RM_PAIRS:
        raise ValueError(f"{export_format} is not a reward-model format (rm-pairs or rm-groups)")
    if _wants(filters, "platform"):
        tasks = submitted_judgements(filters).filter(item__batch__template__in=COMPARISON_TEMPLATES)
        values = tasks.values_list("order", "response__ratings__overall", "item__question_id")
        for order, overall, question in values.iterator(chunk_size=CHUNK):
            if _carries_preference(order, overall):
                yield question
    if _wants(filters, "imported"):
        imported = _imported_comparisons(filters).values_list("question_id", flat=True)
        yield from imported.iterator(chunk_size=CHUNK)


def _group_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """K-way groups (InstructGPT): every ranked answer with its rank, to train on all K-choose-2 pairs."""
    tasks = with_overlap(submitted_judgements(filters).filter(item__batch__template="ranking"))
    for task in tasks.select_related("item__question").order_by("id").iterator(chunk_size=CHUNK):
        ranked = _ranked(task.order, (task.response or {}).get("ranks"))
        if len(ranked) < 2:
            continue
        answers = Answer.objects.in_bulk([pk for _, pk in ranked])
        members = [(rank, answers[pk]) for rank, pk in ranked]
        members.sort(key=lambda pair: (pair[0], pair[1].pk))
        yield {
            "assignment": task.pk,
            "question_id": task.item.question_id,
            "prompts": [answer_prompt(task.item.question.text, a.quotes) for _, a in members],
            "answers": [a.text for _, a in members],
            "ranks": [rank for rank, _ in members],
            "answer_ids": [a.pk for _, a in members],
            "overlap": task.overlap,
            "target_overlap": task.target_overlap,
        }


def _full_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every submitted judgement; then, when asked, the judge runs' (``_model_rows``)."""
    yield from _human_full_rows(filters)
    if filters.get("include_model_judgements"):
        yield from _model_rows(filters)


def _human_full_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    tasks = with_overlap(submitted_judgements(filters)).select_related("item__batch", "item__question")
    for task in tasks.order_by("id").iterator(chunk_size=CHUNK):
        yield {
            "assignment": task.pk,
            "batch": task.item.batch.name,
            "template": task.item.batch.template,
            "preset": task.item.batch.preset,
            "question": _question(task.item.question),
            "answer_ids_in_order_shown": task.order,
            "labeler": pseudonym(task.labeler_id),
            "required_all": task.required_all,
            "response": task.response,
            "flags": task.flags,
            "gold": task.item.is_gold,
            "late": task.status == AssignmentStatus.LATE,
            "active_seconds": round(task.active_seconds, 1),
            "started_at": task.started_at.isoformat(),
            "submitted_at": task.submitted_at.isoformat() if task.submitted_at else None,
            "source": "platform",
            "overlap": task.overlap,
            "target_overlap": task.target_overlap,
        }


# Judgement filters a model's judgement can match, by its lookups (a labeler's name matches none).
_MODEL_LOOKUPS = {
    "batch": "item__batch_id",
    "split": "item__question__split",
    "template": "item__batch__template",
    "since": "created_at__date__gte",
    "until": "created_at__date__lte",
}


def model_judgements(filters: dict[str, Any]) -> QuerySet[ModelJudgement]:
    """The judge runs' judgements an export with ``filters`` holds when it includes them: those read into a
    response (not the outputs that could not be), of the batches, questions, templates and dates asked for,
    gold items unless left out; never of a screening test, and none when the export is narrowed to a labeler
    or to imported comparisons."""
    if filters.get("labeler") or not _wants(filters, "platform"):
        return ModelJudgement.objects.none()
    lookups = {
        _MODEL_LOOKUPS[name]: value for name, value in filters.items() if value and name in _MODEL_LOOKUPS
    }
    rows = ModelJudgement.objects.filter(response__isnull=False, item__batch__is_screening=False, **lookups)
    if not filters.get("include_gold", True):
        rows = rows.filter(item__is_gold=False)
    if filters.get("exclude_eval"):
        rows = rows.exclude(item__question__split=Split.EVAL)
    return _in_rounds(rows, filters)


def _model_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A judge's judgements in the ``comparisons-full`` layout, marked as a model's: ``source`` "model",
    no labeler, and ``judge`` naming the run, the judge, its prompt version, the order asked and its
    confidence."""
    rows = model_judgements(filters).select_related("run", "item__batch", "item__question")
    for judgement in rows.order_by("id").iterator(chunk_size=CHUNK):
        run, item = judgement.run, judgement.item
        yield {
            "model_judgement": judgement.pk,
            "batch": item.batch.name,
            "template": item.batch.template,
            "preset": item.batch.preset,
            "question": _question(item.question),
            "answer_ids_in_order_shown": judgement.order,
            "labeler": None,
            "judge": {
                "run": run.pk,
                "kind": run.judge_kind,
                "name": run.judge_name,
                "prompt_version": run.prompt_version,
                "swapped": judgement.swapped,
                "confidence": judgement.confidence,
            },
            "response": judgement.response,
            "gold": item.is_gold,
            "submitted_at": judgement.created_at.isoformat(),
            "source": "model",
        }


def _episodes(filters: dict[str, Any]) -> Iterator[Episode]:
    """Finished episodes matching the filters. Human demonstrations only unless ``episode_kind`` says
    "model" or "all", or ``sampling_run`` names a run (its samples only): filters stored before model
    samples existed have neither key and keep exporting what they did."""
    episodes = Episode.objects.filter(status=EpisodeStatus.FINISHED).select_related("question", "sample")
    # Screening demonstrations are tests, and a demonstrator's work from before their exclusion is not data.
    excluded = Qualification.objects.filter(
        user=OuterRef("user_id"), kind=DEMONSTRATION, work_excluded_before__gt=OuterRef("finished_at")
    )
    episodes = episodes.exclude(batch__is_screening=True).filter(~Exists(excluded))
    kind = filters.get("episode_kind") or "human"
    if filters.get("sampling_run") is not None:
        episodes = episodes.filter(kind=EpisodeKind.MODEL, sample__run_id=filters["sampling_run"])
    elif kind != "all":
        episodes = episodes.filter(kind=kind)
    if filters.get("split"):
        episodes = episodes.filter(question__split=filters["split"])
    if filters.get("exclude_eval"):
        episodes = episodes.exclude(question__split=Split.EVAL)
    if filters.get("since"):
        episodes = episodes.filter(finished_at__date__gte=filters["since"])
    if filters.get("until"):
        episodes = episodes.filter(finished_at__date__lte=filters["until"])
    return episodes.order_by("id").iterator(chunk_size=200)


def _origin(episode: Episode) -> dict[str, Any]:
    """Where an episode came from: a person (pseudonymised) or a model's sample in a sampling run (its
    index among the question's n samples, its reward and whether best-of-n chose it); None where a field
    does not apply."""
    sample = getattr(episode, "sample", None) if episode.kind == EpisodeKind.MODEL else None
    return {
        "kind": episode.kind,
        "demonstrator": pseudonym(episode.user_id) if episode.user_id is not None else None,
        "policy": episode.policy or None,
        "sampling_run": sample.run_id if sample else None,
        "sample_index": sample.index if sample else None,
        "score": sample.score if sample else None,
        "chosen": sample.chosen if sample else None,
        "declined": sample.declined if sample else None,
    }


def _demonstration_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for episode in _episodes(filters):
        actions = list(
            episode.actions.order_by("index").values("command", "valid", "message", "observation_before")
        )
        yield {
            "episode": episode.pk,
            "question": _question(episode.question),
            **_origin(episode),
            "end_reason": episode.end_reason,
            "commands": [a["command"] for a in actions],
            # What a model learns from (as the BC examples): valid commands less the Quotes whose quotes the
            # person removed, scrolls merged; the removals themselves are listed below.
            "commands_merged": model_commands(
                [(a["command"], a["valid"]) for a in actions], removed_quote_actions(episode.state)
            ),
            "actions": actions,
            "quotes": episode.state["quotes"],
            "removed_quotes": episode.state.get("removed_quotes", []),
            "answer": episode.answer,
            "note": episode.note,
            "active_seconds": round(episode.active_seconds, 1),
            "started_at": episode.started_at.isoformat(),
            "finished_at": episode.finished_at.isoformat() if episode.finished_at else None,
        }


def _bc_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for episode in _episodes(filters):
        for step, example in enumerate(bc_examples(episode)):
            yield {
                "episode": episode.pk,
                "question_id": episode.question_id,
                "kind": episode.kind,
                "step": step,
                **example,
            }


def _step_label_rows(filters: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Each reviewed step of each submitted step review (``steps.rating_rows``: the observation the model
    saw, the action, the labeler's rating, reason and first bad step, one row per step rated) and each
    step preference (``steps.preference_row``: the state's observation, the two actions as shown, the
    preference)."""
    tasks = with_overlap(submitted_judgements(filters).filter(item__batch__template__in=STEP_TEMPLATES))
    tasks = tasks.select_related("item__batch").order_by("item__episode_id", "id")
    episode_id, observations, commands = None, [], []
    for task in tasks.iterator(chunk_size=CHUNK):
        item = task.item
        if item.episode_id != episode_id:  # rows come episode by episode: its actions are read once
            episode_id = item.episode_id
            actions = EpisodeAction.objects.filter(episode_id=episode_id).order_by("index")
            steps = list(actions.values_list("observation_before", "command"))
            observations, commands = [seen for seen, _ in steps], [command for _, command in steps]
        ids = {
            "question_id": item.question_id,
            "episode_id": episode_id,
            "labeler": pseudonym(task.labeler_id),
        }
        if item.batch.template == "step_preference":
            index = int(item.step["index"])
            first, second = item.step["candidates"]
            rows = [preference_row(task.response, observations[index], (first, second), step=index, **ids)]
        else:
            rows = rating_rows(task.response, observations, commands, **ids)
        for row in rows:
            yield {
                **row,
                "assignment": task.pk,
                "batch": item.batch_id,
                "gold": item.is_gold,
                "overlap": task.overlap,
                "target_overlap": task.target_overlap,
            }


ROWS: dict[str, Callable[[dict[str, Any]], Iterator[Any]]] = {
    ExportFormat.WEBGPT_COMPARISONS: lambda f: _comparison_rows(f, pairs=False),
    ExportFormat.WEBGPT_PAIRS: lambda f: _comparison_rows(f, pairs=True),
    ExportFormat.RM_PAIRS: lambda f: _comparison_rows(f, rm=True),
    ExportFormat.RM_GROUPS: _group_rows,
    ExportFormat.COMPARISONS_FULL: _full_rows,
    ExportFormat.DEMONSTRATIONS: _demonstration_rows,
    ExportFormat.BC_PAIRS: _bc_rows,
    ExportFormat.STEP_LABELS: _step_label_rows,
}
