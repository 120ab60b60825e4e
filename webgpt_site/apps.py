from django.apps import AppConfig


class WebgptSiteConfig(AppConfig):
    name = "webgpt_site"
    verbose_name = "Platform"

    def ready(self) -> None:
        from webgpt_site import lockout  # imports models: only once the apps are loaded

        lockout.connect()
