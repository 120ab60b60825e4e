"""Query-string parameters that name objects: one parser for every page and API view (``id_param``; form
fields listing ids use ``ModelIdsField``).

``"²".isdigit()`` is true yet ``int("²")`` fails, a 30-digit id overflows SQLite's integers, and the
database is not the place to find out: an id is ASCII digits from 1 to ``MAX_ID`` or the request is a 400.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import BadRequest, ValidationError
from django.http import QueryDict

from core.inputs import MAX_ID, parse_id


def id_param(query: QueryDict, name: str) -> int | None:
    """The id in query parameter ``name``; None when it is absent or empty; ``BadRequest`` (answered 400)
    when it is anything but an id."""
    raw = query.get(name, "")
    if raw == "":
        return None
    value = parse_id(raw)
    if value is None:
        raise BadRequest(f"'{name}' must be an id: a whole number from 1 to {MAX_ID}.")
    return value


class ModelIdsField(forms.ModelMultipleChoiceField):
    """A ``ModelMultipleChoiceField`` whose values must be ids before the database sees them: Django guards
    ``pk=`` against integers out of the column's range but not ``pk__in=``, which SQLite then refuses with
    an ``OverflowError`` (a 500 for ``?run=999...``)."""

    def clean(self, value: Any) -> Any:
        for pk in value if isinstance(value, list | tuple) else ():
            if parse_id(pk) is None:
                raise ValidationError(
                    self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                )
        return super().clean(value)
