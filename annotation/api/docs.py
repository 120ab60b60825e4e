"""The API's documentation page under the site's strict CSP ('self' only): Swagger UI from our own static
files (drf-spectacular-sidecar), its start-up script as a separate same-origin request, no inline styles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.decorators import login_required
from django.template import engines
from django.template.backends.django import Template
from django.utils.decorators import method_decorator
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.renderers import TemplateHTMLRenderer

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title|default:"API" }}</title>
{% if favicon_href %}<link rel="icon" href="{{ favicon_href }}">{% endif %}
<link rel="stylesheet" href="{{ swagger_ui_css }}">
</head>
<body>
<p><a href="{% url 'home' %}">Back to the platform</a> ·
<a href="{% url 'account:token' %}">Your API token</a></p>
<div id="swagger-ui"></div>
<script src="{{ swagger_ui_bundle }}"></script>
<script src="{{ swagger_ui_standalone }}"></script>
<script src="{{ script_url }}"></script>
</body>
</html>
"""


class _CspPageRenderer(TemplateHTMLRenderer):
    """drf-spectacular's page without its inline <style> (refused by the CSP); the init script as is."""

    def resolve_template(self, template_names: Sequence[str]) -> Any:
        if list(template_names) == [SpectacularSwaggerSplitView.template_name]:
            template: Template = engines["django"].from_string(PAGE)
            return template
        return super().resolve_template(template_names)


@method_decorator(login_required, name="dispatch")  # anonymous: the sign-in page, then back here
class ApiDocs(SpectacularSwaggerSplitView):
    """Like the schema it shows, for signed-in people only (anonymous, it was an empty page: the schema
    behind it answered 401)."""

    renderer_classes = (_CspPageRenderer,)
    url_name = "api-schema"
