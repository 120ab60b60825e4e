from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Platform"

    def ready(self) -> None:
        from core import lockout  # imports models: only once the apps are loaded

        lockout.connect()
