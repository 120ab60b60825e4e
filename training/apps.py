from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "training"

    def ready(self) -> None:
        # Batches from sampling runs: annotation's batch service asks for the loop's pairing through this.
        from annotation.feedback.run_source import provide_pairing
        from training.evaluation.pairing import pair_runs

        provide_pairing(pair_runs)
