"""Parquet output for the comparison exports, written in row groups so memory stays constant."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

_QUOTES = pa.struct([("title", pa.list_(pa.string())), ("extract", pa.list_(pa.string()))])
_QUESTION = pa.struct([("dataset", pa.string()), ("full_text", pa.string()), ("id", pa.string())])

# The public dataset's columns (tokens are left empty, see formats.py) plus where each judgement came from.
WEBGPT_COMPARISONS = pa.schema(
    [("question", _QUESTION)]
    + [
        field
        for index in (0, 1)
        for field in (
            (f"quotes_{index}", _QUOTES),
            (f"answer_{index}", pa.string()),
            (f"tokens_{index}", pa.list_(pa.int64())),
            (f"score_{index}", pa.float64()),
        )
    ]
    + [("source", pa.string())]
)
RM_PAIRS = pa.schema(
    [
        ("prompt_chosen", pa.string()),
        ("chosen", pa.string()),
        ("prompt_rejected", pa.string()),
        ("rejected", pa.string()),
        ("label", pa.float64()),
        ("margin", pa.float64()),
        ("assignment", pa.int64()),
        ("imported", pa.int64()),
        ("answer_chosen", pa.int64()),
        ("answer_rejected", pa.int64()),
        ("question_id", pa.int64()),
        # The item's final overlap and target (platform judgements; null for imported ones).
        ("overlap", pa.int64()),
        ("target_overlap", pa.int64()),
    ]
)
# Step reviews' and step preferences' rows (``feedback/steps.rating_rows``, ``preference_row``), as the
# process reward model reads them; a column the kind lacks is null.
STEP_LABELS = pa.schema(
    [
        ("kind", pa.string()),
        ("assignment", pa.int64()),
        ("batch", pa.int64()),
        ("question_id", pa.int64()),
        ("episode_id", pa.int64()),
        ("labeler", pa.string()),
        ("step", pa.int64()),
        ("observation", pa.string()),
        ("action", pa.string()),
        ("rating", pa.string()),
        ("action_a", pa.string()),
        ("action_b", pa.string()),
        ("preference", pa.string()),
        ("reason", pa.string()),
        ("note", pa.string()),
        ("first_bad", pa.int64()),
        ("gold", pa.bool_()),
        ("overlap", pa.int64()),
        ("target_overlap", pa.int64()),
    ]
)
SCHEMAS = {"webgpt-comparisons": WEBGPT_COMPARISONS, "rm-pairs": RM_PAIRS, "step-labels": STEP_LABELS}
ROW_GROUP = 5000


def write_parquet(rows: Iterable[dict[str, Any]], schema: pa.Schema, out: BinaryIO) -> int:
    """Write ``rows`` (dicts with the schema's keys; missing ones become null) and return how many."""
    count = 0
    iterator: Iterator[dict[str, Any]] = iter(rows)
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        while chunk := list(islice(iterator, ROW_GROUP)):
            writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
            count += len(chunk)
        if count == 0:
            writer.write_table(schema.empty_table())
    return count
