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
            unknown = sorted(str(key)[:100] for key in data if key not in self.fields)
            if unknown:
                expected = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {key: [f"unknown; expected {expected}"] for key in unknown[:MAX_UNKNOWN_SHOWN]}
                )
        return super().to_internal_value(data)
