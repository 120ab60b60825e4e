"""A feedback batch's results page and the CSV of each of its tables (researchers). The figures come from
``results.batch_results``; each table is defined once here, for the page and its CSV alike."""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.feedback.result_stats import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RESAMPLES_RANGE,
    SEED_RANGE,
    SettingsError,
)
from annotation.feedback.results import preference_label, results_for_query
from annotation.feedback.results_plot import preference_chart, selective_chart
from annotation.models import FeedbackBatch
from core.permissions import Role, get_visible_or_404, role_required

NO_JUDGEMENTS = "no judgements"
# A spreadsheet runs a cell that starts with one of these as a formula (labels and usernames are typed
# by people): such text gets a leading apostrophe in the CSV. Numbers are written as numbers.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Column:
    header: str
    key: str
    kind: str = "text"  # text, figure (0..1 and its interval: 3 decimals), count, number


@dataclass(frozen=True)
class Table:
    name: str  # the CSV's name in its URL
    title: str
    columns: tuple[Column, ...]
    rows: list[Mapping[str, Any]]


FIGURE = (
    Column("Value", "value", "figure"),
    Column("95% CI low", "low", "figure"),
    Column("95% CI high", "high", "figure"),
    Column("Judgements", "judgements", "count"),
    Column("Questions", "questions", "count"),
)


def result_tables(results: Mapping[str, Any]) -> dict[str, Table]:
    """The tables the batch's results have, by name, in page order: the labelers', then each judge run's."""
    tables = human_tables(results) + [
        table for section in results["judges"] for table in judge_tables(section)
    ]
    return {table.name: table for table in tables}


def human_tables(results: Mapping[str, Any]) -> list[Table]:
    """The tables of the labelers' judgements."""
    tables = []
    if results["preference"]:
        title = preference_label(results["sides"]) + ", ties counting half"
        tables.append(
            Table("preference", title, (Column("Dimension", "label"), *FIGURE), results["preference"])
        )
    if results["rates"]:
        tables.append(Table("rates", "Rates", (Column("Rate", "label"), *FIGURE), results["rates"]))
    curve = results["selective_prediction"]
    if curve:
        columns = (
            Column("Run", "run_label"),
            Column("Reward threshold", "threshold", "number"),
            Column("Coverage", "coverage", "figure"),
            Column("Questions answered", "answered", "count"),
            Column(f"{curve['label']} rate", "rate", "figure"),
            Column("Judgements", "judgements", "count"),
        )
        rows = [{"run_label": c["label"], **point} for c in curve["curves"] for point in c["points"]]
        tables.append(Table("selective_prediction", "Selective prediction", columns, rows))
    if results["agreement"] is not None:
        columns = (
            Column("Figure", "label"),
            *FIGURE[:3],
            Column("Pairs of judgements", "pairs", "count"),
            Column("Items", "items", "count"),
            Column("Questions", "questions", "count"),
        )
        row = {"label": "Pairwise agreement", **results["agreement"]}
        tables.append(Table("agreement", "Agreement between labelers", columns, [row]))
    columns = (
        Column("Labeler", "labeler"),
        Column("Submitted", "submitted", "count"),
        Column("Skipped", "skipped", "count"),
        Column("Flagged", "flagged", "count"),
        Column("Median active seconds", "median_active_seconds", "number"),
        Column("Agreement", "agreement", "figure"),
        Column("Gold accuracy", "gold_accuracy", "figure"),
    )
    tables.append(Table("labelers", "Labelers", columns, results["labelers"]))
    columns = (
        Column("Final overlap (submitted judgements)", "overlap", "count"),
        Column("Items", "items", "count"),
    )
    tables.append(Table("overlap", "Final overlap of the items", columns, results["overlap"]["distribution"]))
    return tables


PATH_LABELS = {
    "judge": "Decided by the judge",
    "audit": "Audited: sent to labelers too",
    "human": "Sent to labelers",
}


def judge_tables(section: Mapping[str, Any]) -> list[Table]:
    """One judge run's tables (``judging.report``), named ``judge-<run>-...``."""
    run, judge = section["run"]["id"], section["run"]["judge"]
    name = f"judge-{run}"
    tables = [
        Table(
            f"{name}-agreement",
            f"{judge} and the labelers, side by side",
            (Column("Figure", "label"), *FIGURE),
            section["agreement"],
        ),
    ]
    columns = (
        Column("Labeler", "labeler"),
        *(
            Column(f"{header} {part}", f"{prefix}_{key}", kind)
            for prefix, header in (("others", "With the other labelers:"), ("judge", f"With {judge}:"))
            for part, key, kind in (
                ("value", "value", "figure"),
                ("95% CI low", "low", "figure"),
                ("95% CI high", "high", "figure"),
                ("items", "judgements", "count"),
            )
        ),
    )
    tables.append(
        Table(
            f"{name}-labelers", f"Each labeler with the others and with {judge}", columns, section["labelers"]
        )
    )
    tables.append(
        Table(
            f"{name}-position-bias",
            f"{judge}: position bias",
            (Column("Figure", "label"), *FIGURE),
            section["position_bias"],
        )
    )
    for confusion in section["confusion"]:
        columns = (
            Column(f"{judge} says", "judge"),
            *(Column(column["label"], column["key"], "count") for column in confusion["columns"]),
            Column("Total", "total", "count"),
        )
        title = f"{confusion['label']}: {judge} (rows) against the labelers' majority (columns)"
        tables.append(Table(f"{name}-confusion-{confusion['measure']}", title, columns, confusion["rows"]))
    routing = section["routing"]
    if routing:
        rows = [
            {"path": PATH_LABELS[path], "items": count, "judged": routing["judged_by_labelers"][path]}
            for path, count in routing["paths"].items()
        ]
        columns = (
            Column("Path", "path"),
            Column("Items", "items", "count"),
            Column("Judged by labelers", "judged", "count"),
        )
        tables.append(Table(f"{name}-routing", f"{judge}: items decided by each path", columns, rows))
        figures = [routing["audit"], *([routing["preference"]] if routing["preference"] else [])]
        tables.append(
            Table(
                f"{name}-routed", f"{judge}: routed verdicts", (Column("Figure", "label"), *FIGURE), figures
            )
        )
    return tables


def shown(value: Any, column: Column) -> str:
    """A cell as the page shows it."""
    if value is None:
        return NO_JUDGEMENTS if column.key == "value" else "—"
    if column.kind == "figure":
        return f"{value:.3f}"
    if column.kind == "number":
        return f"{value:.4g}"
    return str(value)


def page_rows(table: Table) -> list[list[tuple[str, bool]]]:
    """Each row's cells as (text, is a number)."""
    return [[(shown(row.get(c.key), c), c.kind != "text") for c in table.columns] for row in table.rows]


def csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _query(seed: int, resamples: int, judge_verdicts: bool) -> str:
    """The query string that keeps a chosen seed, resample count and ``judge_verdicts`` on the page's
    links."""
    changed: dict[str, Any] = {"seed": seed} if seed != DEFAULT_SEED else {}
    changed |= {"resamples": resamples} if resamples != DEFAULT_RESAMPLES else {}
    changed |= {"judge_verdicts": "on"} if judge_verdicts else {}
    return f"?{urlencode(changed)}" if changed else ""


@require_GET
@role_required(Role.RESEARCHER)
def results_page(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    context: dict[str, Any] = {
        "batch": batch,
        "seed_range": SEED_RANGE,
        "resamples_range": RESAMPLES_RANGE,
        "seed": request.GET.get("seed", DEFAULT_SEED),
        "resamples": request.GET.get("resamples", DEFAULT_RESAMPLES),
        "judge_verdicts": request.GET.get("judge_verdicts", "") in ("on", "1"),
    }
    try:
        results = results_for_query(batch, request.GET)
    except SettingsError as exc:
        context["error"] = exc
        return render(request, "console/feedback_results.html", context, status=400)
    context |= {
        "results": results,
        "tables": [(table, page_rows(table)) for table in human_tables(results)],
        "judges": [
            (section, [(table, page_rows(table)) for table in judge_tables(section)])
            for section in results["judges"]
        ],
        "routed": any(section["routing"] for section in results["judges"]),
        "query": _query(results["seed"], results["resamples"], results["judge_verdicts"]),
        "preference_chart": (
            preference_chart(results["preference"], results["sides"]) if results["preference"] else ""
        ),
        "selective_chart": (
            selective_chart(results["selective_prediction"]) if results["selective_prediction"] else ""
        ),
    }
    return render(request, "console/feedback_results.html", context)


@require_GET
@role_required(Role.RESEARCHER)
def results_csv(request: HttpRequest, pk: int, table: str) -> HttpResponse:
    batch = get_visible_or_404(FeedbackBatch.objects, request.user, pk=pk)
    try:
        tables = result_tables(results_for_query(batch, request.GET))
    except SettingsError as exc:
        return _bad_request(exc.message)
    if table not in tables:
        return _bad_request(f"This batch has no table '{table[:50]}'; its tables are {', '.join(tables)}.")
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.pk}-{table}.csv"'
    write_csv(response, tables[table])
    return response


def write_csv(out: Any, table: Table) -> None:
    """The table as CSV into ``out`` (anything with ``write``): headers, then one line per row; figures
    unrounded, missing values empty."""
    writer = csv.writer(out)
    writer.writerow([csv_cell(column.header) for column in table.columns])  # a judge's name is typed text
    for row in table.rows:
        writer.writerow([csv_cell(row.get(column.key)) for column in table.columns])


def _bad_request(message: str) -> HttpResponse:
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
