"""The API's JSON parser, with limits (set in ``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``).

DRF's own parser hands any valid JSON to the views: 5,000 nested levels (``RecursionError`` further on, a
500 and, under DEBUG, over a minute of CPU for a 3.6 KB body), ``NaN`` or ``1e999`` (stored in jsonb: a
database error) and U+0000 (PostgreSQL cannot store it in text or jsonb). This one answers each with a 400
that says what is wrong. The body's size is capped before parsing by Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``
(DRF reads JSON bodies through ``request.body``).
"""

from __future__ import annotations

from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.inputs import MAX_JSON_DEPTH, JSONInputError, loads, nul_path


class JSONParser(parsers.JSONParser):
    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: dict[str, Any] | None = None
    ) -> Any:
        encoding = parsers.get_encoding(parser_context or {})
        try:
            value = loads(stream.read().decode(encoding), max_depth=MAX_JSON_DEPTH)
        except (JSONInputError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        path = nul_path(value)
        if path is not None:
            where = ".".join(path) or "the body"
            raise ParseError(f"Text may not contain NUL characters (U+0000): found in {where}.")
        return value
