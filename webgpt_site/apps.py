from django.apps import AppConfig


class WebgptSiteConfig(AppConfig):
    name = "webgpt_site"
    verbose_name = "Site"
