"""Agreement and the signals of careless work over the API, unrounded, so a researcher can script a check of
the quality gates: a batch's Krippendorff's alpha per measure (``api-batch-agreement``, the table on the
batch's page) and a kind of work's alpha over its production batches with each labeler's signals
(``api-workforce-kind``, the kind's page). The figures are the ones the pages show, from the same functions
(``alpha_stats.batch_alpha`` and ``template_alpha``, ``signals.signals_for_kind``); only the pages round."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.api.permissions import IsResearcher
from annotation.feedback.alpha_stats import batch_alpha, rows_as_dicts, template_alpha
from annotation.models import FeedbackBatch, Qualification
from annotation.workforce.signals import (
    SIGNAL_LABELS,
    Share,
    Signal,
    Signals,
    kind_template,
    signals_for_kind,
)
from annotation.workforce.states import State, all_kinds, kind_label
from core.permissions import get_visible_or_404


class BatchAgreement(APIView):
    """Krippendorff's alpha of the batch's judgements, one row per measure as its page lists them:
    ``measure``, ``label``, ``level`` (ordinal or nominal), ``alpha`` (null: no pairable item, or
    ``no_variation``), ``low`` and ``high`` (the 95% bootstrap interval over items, ``resamples`` draws),
    ``items``, ``units`` and ``values`` (the pairable values the alpha counts), ``text`` (the page's
    words)."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, pk: int) -> Response:
        batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
        return Response({"batch": batch.pk, "alpha": rows_as_dicts(batch_alpha(batch))})


class WorkforceKind(APIView):
    """One kind of feedback work: ``alpha`` over its production batches (rows as a batch's agreement) and
    ``labelers``: each one's state, submissions, median seconds and signals (``position_bias``,
    ``constant_rating``, ``fast_tasks``, ``agreement``, ``contradictions``; null where the kind has no
    such signal), each with the labeler's share and the other labelers' (``value``, ``successes``,
    ``count``, 95% Wilson ``low`` and ``high``) and whether it is notable. 404 for demonstrations and a
    kind of work that does not exist."""

    permission_classes = (IsResearcher,)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, kind: str) -> Response:
        template = kind_template(kind)
        if template is None or kind not in all_kinds():
            return Response({"detail": "No such kind of feedback work."}, status=404)
        signals = signals_for_kind(kind)
        states = dict(Qualification.objects.filter(kind=kind).values_list("user_id", "state"))
        names = dict(get_user_model().objects.filter(pk__in=signals).values_list("pk", "username"))
        labelers = [
            labeler_data(one, names.get(user_id, ""), states.get(user_id, State.APPLICANT))
            for user_id, one in sorted(signals.items(), key=lambda pair: names.get(pair[0], ""))
        ]
        return Response(
            {
                "kind": kind,
                "label": kind_label(kind),
                "alpha": rows_as_dicts(template_alpha(*template)),
                "labelers": labelers,
            }
        )


def labeler_data(signals: Signals, username: str, state: str) -> dict[str, Any]:
    return {
        "user": signals.user_id,
        "username": username,
        "state": state,
        "submitted": signals.submitted,
        "median_seconds": signals.median_seconds,
        "kind_median_seconds": signals.kind_median_seconds,
        "signals": {code: _signal(getattr(signals, code)) for code in SIGNAL_LABELS},
    }


def _signal(signal: Signal | None) -> dict[str, Any] | None:
    if signal is None:
        return None
    return {**asdict(signal), "mine": _share(signal.mine), "others": _share(signal.others)}


def _share(share: Share | None) -> dict[str, Any] | None:
    return None if share is None else {"value": share.value, **asdict(share)}
