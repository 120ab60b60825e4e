"""Input serializers that refuse keys they do not know: a misspelt option (``temprature``) would
otherwise be dropped without a word and the request run with the default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

MAX_UNKNOWN_SHOWN = 10  # a body of a thousand junk keys gets a short answer


class StrictSerializer(serializers.Serializer):
    """Refuses keys it does not know, each under its own name, listing the ones it takes."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(key)[:100] for key in data if not self._knows(key, data))
            if unknown:
                expected = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {key: [f"unknown; expected {expected}"] for key in unknown[:MAX_UNKNOWN_SHOWN]}
                )
        return super().to_internal_value(data)

    def _knows(self, key: Any, data: Mapping[str, Any]) -> bool:
        if key in self.fields:
            return True
        # A form body spells a dict field's keys "field.key" and a list's items "field[0]" (DRF's HTML input).
        html_input = hasattr(data, "getlist")
        return html_input and str(key).partition(".")[0].partition("[")[0] in self.fields
