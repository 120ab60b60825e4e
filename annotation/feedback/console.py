"""Researcher pages for feedback batches: list with progress, create, detail with labeler quality."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.feedback.alpha_stats import batch_alpha
from annotation.feedback.batch_settings import model_default
from annotation.feedback.batches import (
    GOLD_MIN_ITEMS,
    MAX_INSTRUCTIONS,
    MAX_NAME,
    MAX_OVERLAP,
    MAX_RUNS,
    OVERLAP,
    PAIRS_PER_QUESTION,
    PRIORITY,
    RANK_AGREEMENT,
    SHARE,
    SOURCES,
    BatchError,
    BatchSettings,
    check_batch_request,
    create_batch_from_source,
    set_active,
    set_priority,
)
from annotation.feedback.bulk import ACTIONS, PRIORITY_HELP, BulkForm
from annotation.feedback.bulk import apply as apply_bulk
from annotation.feedback.flag_review import flag_counts
from annotation.feedback.run_source import PAIRINGS, run_label, sampling_runs
from annotation.feedback.scales import RANKING_PRESET_CHOICES, RATING_PRESET_CHOICES, TEMPLATES
from annotation.feedback.stats import batch_progress, labeler_stats, late_submissions, overlap_summary
from annotation.models import DemonstrationBatch, FeedbackBatch
from annotation.questions.formats import QuestionFileError
from core.inputs import parse_id
from core.jobs.models import FINISHED
from core.permissions import Role, get_visible_or_404, role_required

RUNS_OFFERED = 100  # the newest finished runs in the select (and any the link names)
SKIPPED_SHOWN = 200  # skipped questions listed on a batch's page; the count says how many in all


def _number(low: float, high: float, step: str = "1") -> forms.NumberInput:
    """The browser's hint of the range; the rule itself is ``batches.check_batch_settings``."""
    return forms.NumberInput(attrs={"min": low, "max": high, "step": step})


def _or_default(data: dict[str, Any], name: str) -> Any:
    """A blank optional field: the model's default, as the API and the command have it."""
    return model_default(name) if data.get(name) is None else data[name]


class RunIdsField(forms.TypedMultipleChoiceField):
    """Sampling run ids. The select offers finished runs, but any id is passed on, so that
    ``check_batch_request`` says why a run cannot be used (missing, still running) in the same words as
    the API and the command."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(coerce=int, required=False, **kwargs)

    def valid_value(self, value: str) -> bool:
        return parse_id(value) is not None


def run_choices(named: list[int]) -> list[tuple[int, str]]:
    """The newest finished runs, and the finished ones ``named`` (a link's prefill) if older."""
    finished = sampling_runs().objects.filter(status__in=FINISHED).defer("log", "metrics", "settings")
    runs = list(finished[:RUNS_OFFERED])
    runs += [run for run in finished.filter(pk__in=named) if run not in runs]
    return [
        (run.pk, f"{run_label(run)}, {len(run.question_ids)} questions ({run.get_status_display().lower()})")
        for run in runs
    ]


class FeedbackBatchForm(forms.Form):
    """The page's fields; what a batch may be is checked by ``batches.check_batch_request``, the same check
    as the API's and the ``create_feedback_batch`` command's."""

    name = forms.CharField(widget=forms.TextInput(attrs={"maxlength": MAX_NAME}))
    template = forms.ChoiceField(choices=TEMPLATES)
    preset = forms.ChoiceField(
        required=False,
        choices=[("", "—"), *RATING_PRESET_CHOICES, *RANKING_PRESET_CHOICES],
        label="Preset",
        help_text="Ratings: the criteria (required). Rankings: the metadata checkboxes (default WebGPT's).",
    )
    source = forms.ChoiceField(choices=SOURCES, label="Answers")
    answers_file = forms.FileField(
        required=False,
        help_text="For the answers-file source: JSONL {question_id or question, answer, quotes, source}",
    )
    runs = RunIdsField(
        label="Sampling runs",
        help_text=f"For the sampling-runs source: one run (pairs of its samples, a ranking of them, or its "
        f"answers rated), or {MAX_RUNS} runs (their chosen answers side by side). Finished runs only.",
    )
    vs_demonstrations = forms.BooleanField(
        required=False,
        label="Against human demonstrations",
        help_text="Comparisons of one run: its chosen answer against a human demonstration of the question",
    )
    pairs_per_question = forms.IntegerField(
        required=False,
        initial=1,
        widget=_number(*PAIRS_PER_QUESTION),
        help_text="One run's comparisons: distinct pairs of samples (or demonstrations) per question",
    )
    include_declined = forms.BooleanField(
        required=False,
        label="Include declined answers",
        help_text="Questions the run declined (best score under its threshold): their best answer is used",
    )
    demonstration_batch = forms.TypedChoiceField(
        coerce=int,
        empty_value=None,
        required=False,
        label="Demonstration batch",
        help_text="Step reviews of demonstrations: the episodes of one demonstration batch (empty: every "
        "finished demonstration)",
    )
    judged_worse = forms.BooleanField(
        required=False,
        label="Only episodes judged worse",
        help_text="Step reviews of sampling runs: only the episodes whose answer a comparison judged worse",
    )
    overlap = forms.IntegerField(initial=1, widget=_number(*OVERLAP), help_text="Labelers per item")
    priority = forms.IntegerField(
        required=False,
        initial=1,
        widget=_number(*PRIORITY),
        help_text="Share of each labeler's next tasks: priority 2 comes up twice as often as priority 1",
    )
    required_probability = forms.FloatField(
        initial=0.1,
        widget=_number(0, 1, "any"),
        help_text="Probability that every part of a task is required",
    )
    always_required = forms.CharField(
        required=False,
        help_text="Comma-separated field codes required in every task (empty: the template's default)",
    )
    instructions = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "maxlength": MAX_INSTRUCTIONS})
    )
    gold_pairs = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Comparisons only: gold items, one per line: '12 > 34' or '12 = 34' (answer ids)",
    )
    lease_minutes = forms.IntegerField(initial=30, widget=_number(1, 24 * 60))
    revision_minutes = forms.IntegerField(initial=60, widget=_number(0, 7 * 24 * 60))
    max_overlap = forms.IntegerField(
        required=False,
        label="Maximum overlap (adaptive)",
        widget=_number(*MAX_OVERLAP),
        help_text="Empty: every item gets the overlap above. Otherwise an item whose judgements are split "
        "(comparisons: as many prefer one answer as the other; rankings: their mean Kendall tau under the "
        "threshold below) asks for one more labeler, never one who had it, up to this many. Ratings never "
        "ask for more.",
    )
    rank_agreement_threshold = forms.FloatField(
        required=False,
        initial=model_default("rank_agreement_threshold"),
        widget=_number(*RANK_AGREEMENT, "any"),
        help_text="Rankings with a maximum overlap: the rankings disagree when their mean Kendall tau-b is "
        "under this (-1 to 1)",
    )
    is_screening = forms.BooleanField(
        required=False,
        label="Screening test",
        help_text="Every applicant for this kind of work judges every item, so the overlap settings do not "
        "apply; enter researchers' reference judgements on its items (on the task page) to score them",
    )
    agreement_cutoff = forms.FloatField(
        required=False,
        initial=model_default("agreement_cutoff"),
        widget=_number(*SHARE, "any"),
        help_text="Screening: the soft cutoff on agreement with the references' preferences or rankings, 0-1",
    )
    flag_cutoff = forms.FloatField(
        required=False,
        initial=model_default("flag_cutoff"),
        widget=_number(*SHARE, "any"),
        help_text="Screening: the soft cutoff on agreement with the references' question flags, 0-1",
    )
    gold_threshold = forms.FloatField(
        required=False,
        initial=model_default("gold_threshold"),
        widget=_number(*SHARE, "any"),
        help_text="A labeler whose rolling gold accuracy falls under this is paused for this kind of "
        "work, 0-1",
    )
    gold_min_items = forms.IntegerField(
        required=False,
        initial=model_default("gold_min_items"),
        widget=_number(*GOLD_MIN_ITEMS),
        help_text="Gold judgements a labeler makes before the pause may apply",
    )

    # The check names BatchSettings' fields; these are the page's names for them.
    FIELD_NAMES = {"lease_seconds": "lease_minutes", "revision_seconds": "revision_minutes"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        named = [parse_id(pk) for pk in self.initial.get("runs", [])]
        self.fields["runs"].choices = run_choices([pk for pk in named if pk is not None])
        self.fields["demonstration_batch"].choices = [
            ("", "—"),
            *DemonstrationBatch.objects.order_by("-created_at").values_list("pk", "name")[:RUNS_OFFERED],
        ]

    @staticmethod
    def prefill(query: QueryDict) -> dict[str, object]:
        """Initial values from a link (the sampling run page's "Make a feedback batch from this run":
        ``?source=runs&runs=3``); anything unusable is left at its default."""
        initial: dict[str, object] = {}
        if query.get("source") in dict(SOURCES):
            initial["source"] = query["source"]
        if query.get("template") in dict(TEMPLATES):
            initial["template"] = query["template"]
        runs = [pk for pk in map(parse_id, query.getlist("runs")[:MAX_RUNS]) if pk is not None]
        if runs:
            initial["runs"] = runs
            initial.setdefault("source", "runs")
            initial["name"] = "Answers of " + " vs ".join(f"run {pk}" for pk in runs)
        for flag in ("vs_demonstrations", "include_declined", "judged_worse"):
            if query.get(flag) in ("1", "on", "true"):
                initial[flag] = True
        demonstrated = parse_id(query.get("demonstration_batch", ""))
        if demonstrated is not None:
            initial["demonstration_batch"] = demonstrated
        pairs = parse_id(query.get("pairs_per_question", ""))
        if pairs is not None and PAIRS_PER_QUESTION[0] <= pairs <= PAIRS_PER_QUESTION[1]:
            initial["pairs_per_question"] = pairs
        return initial

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        always = [code.strip() for code in data["always_required"].split(",") if code.strip()] or None
        data["settings"] = BatchSettings(
            name=data["name"],
            template=data["template"],
            preset=data["preset"],
            instructions=data["instructions"],
            overlap=data["overlap"],
            priority=1 if data["priority"] is None else data["priority"],
            required_probability=data["required_probability"],
            always_required=always,
            lease_seconds=data["lease_minutes"] * 60,
            revision_seconds=data["revision_minutes"] * 60,
            runs=data["runs"],
            vs_demonstrations=data["vs_demonstrations"],
            pairs_per_question=1 if data["pairs_per_question"] is None else data["pairs_per_question"],
            include_declined=data["include_declined"],
            demonstration_batch=data["demonstration_batch"],
            judged_worse=data["judged_worse"],
            is_screening=data["is_screening"],
            agreement_cutoff=_or_default(data, "agreement_cutoff"),
            flag_cutoff=_or_default(data, "flag_cutoff"),
            gold_threshold=_or_default(data, "gold_threshold"),
            gold_min_items=_or_default(data, "gold_min_items"),
            max_overlap=data["max_overlap"],
            rank_agreement_threshold=_or_default(data, "rank_agreement_threshold"),
        )
        try:
            check_batch_request(
                data["settings"], data["source"], data["answers_file"] is not None, data["gold_pairs"]
            )
        except BatchError as exc:
            self.add_error(self.FIELD_NAMES.get(exc.field, exc.field), exc.message)
        return data


@require_GET
@role_required(Role.RESEARCHER)
def batch_list(request: HttpRequest) -> HttpResponse:
    return _list_page(request, FeedbackBatchForm(initial=FeedbackBatchForm.prefill(request.GET)))


def _list_page(
    request: HttpRequest, form: FeedbackBatchForm, bulk: BulkForm | None = None, status: int = 200
) -> HttpResponse:
    batches = [(batch, batch_progress(batch)) for batch in FeedbackBatch.objects.order_by("-created_at")]
    context = {
        "batches": batches,
        "form": form,
        "bulk": bulk or BulkForm(user=request.user),
        "bulk_actions": ACTIONS,
        "priority_help": PRIORITY_HELP,
        "priority_range": PRIORITY,
    }
    return render(request, "console/feedback_list.html", context, status=status)


@require_POST
@role_required(Role.RESEARCHER)
def batch_bulk(request: HttpRequest) -> HttpResponse:
    """Pause, start or set the priority of the batches ticked on the list."""
    bulk = BulkForm(request.POST, user=request.user)
    if not bulk.is_valid():
        return _list_page(request, FeedbackBatchForm(), bulk, status=400)
    data = bulk.cleaned_data
    done = apply_bulk(request.user, list(data["batches"]), data["action"], data["bulk_priority"])
    messages.success(request, done)
    return redirect("console:feedback")


@require_http_methods(["POST"])
@role_required(Role.RESEARCHER)
def batch_create(request: HttpRequest) -> HttpResponse:
    form = FeedbackBatchForm(request.POST, request.FILES)
    if form.is_valid():
        upload = form.cleaned_data["answers_file"]
        try:
            batch = create_batch_from_source(
                request.user,
                form.cleaned_data["settings"],
                form.cleaned_data["source"],
                upload,  # read a chunk at a time, after its size is checked
                gold_pairs=form.cleaned_data["gold_pairs"],
            )
        except (BatchError, QuestionFileError) as exc:
            form.add_error(None, f"{exc}. Nothing was created.")
        else:
            messages.success(request, f"Batch {batch.name!r} created with {batch.items.count()} items.")
            return redirect("console:feedback_batch", pk=batch.pk)
    return _list_page(request, form, status=400)


@require_GET
@role_required(Role.RESEARCHER)
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    return _detail_page(request, batch)


def _detail_page(request: HttpRequest, batch: FeedbackBatch, priority_error: str = "") -> HttpResponse:
    context = {
        "batch": batch,
        "progress": batch_progress(batch),
        "flag_counts": flag_counts(batch),
        "labelers": labeler_stats(batch),
        "alphas": batch_alpha(batch),
        "late": late_submissions(batch)[:100],  # the oldest; the count above has them all
        "overlap": overlap_summary(batch),
        "origin": origin_context(batch),
        "priority_range": PRIORITY,
        "priority_error": priority_error,
    }
    return render(request, "console/feedback_detail.html", context, status=400 if priority_error else 200)


def origin_context(batch: FeedbackBatch) -> dict[str, object]:
    """How the batch's answers were chosen, for its page (researchers only: it names the sides)."""
    origin = batch.origin if isinstance(batch.origin, dict) else {}
    skipped = origin.get("skipped") if isinstance(origin.get("skipped"), list) else []
    order = origin.get("runs") if isinstance(origin.get("runs"), list) else []
    position = {pk: index for index, pk in enumerate(order)}  # run 1 is side A: shown first
    return {
        "source": dict(SOURCES).get(origin.get("source", ""), ""),
        "pairing": PAIRINGS.get(origin.get("pairing", ""), ""),
        "runs": sorted(
            batch.sampling_runs.all(), key=lambda run: (position.get(run.pk, len(position)), run.pk)
        ),
        "sides": origin.get("sides") if isinstance(origin.get("sides"), dict) else {},
        "include_declined": origin.get("include_declined"),
        "pairs_per_question": origin.get("pairs_per_question"),
        "skipped": skipped[:SKIPPED_SHOWN],
        "skipped_count": len(skipped),
    }


@require_POST
@role_required(Role.RESEARCHER)
def batch_priority(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    raw = request.POST.get("priority", "").strip()
    try:
        set_priority(
            request.user, batch, int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 4 else -1
        )
    except BatchError as exc:
        return _detail_page(request, batch, priority_error=f"{exc.message} Nothing was changed.")
    messages.info(request, f"Priority set to {int(raw)}.")
    return redirect("console:feedback_batch", pk=batch.pk)


BATCH_STATES = {"active": True, "paused": False}  # what the page's Start and Pause buttons send


@require_POST
@role_required(Role.RESEARCHER)
def batch_state(request: HttpRequest, pk: int) -> HttpResponse:
    """Start or pause: the button says which, so a press from a stale page is a no-op that says so."""
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    wanted = BATCH_STATES.get(request.POST.get("state", ""))
    if wanted is None:
        return HttpResponseBadRequest("state must be 'active' or 'paused'.")
    if set_active(request.user, batch, wanted):
        messages.info(request, f"Batch {'started' if wanted else 'paused'}.")
    else:
        messages.info(request, f"The batch was already {'active' if wanted else 'paused'}: nothing changed.")
    return redirect("console:feedback_batch", pk=batch.pk)
