"""``manage.py load_demo`` (on the top floor: it loads every app's demo data): demo users, the shipped
question sets and corpus, demo batches, and the demo's reward model queued for the training worker.
Development only; idempotent."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.demo import (
    DEMO_BATCH_DATASET,
    DEMO_BATCH_NAME,
    DEMO_CORPUS_DIR,
    DEMO_CORPUS_NAME,
    DEMO_QUESTION_FILES,
    DEMO_USERS,
)
from annotation.demonstrations.batches import create_demonstration_batch
from annotation.feedback.demo import create_demo_feedback_batches, create_reference_comparisons
from annotation.feedback.demo_answers import DemoAnswersError
from annotation.models import DemonstrationBatch, Question, QuestionImport
from annotation.questions.service import import_questions
from annotation.workforce import demo as workforce_demo
from browser.models import Corpus
from browser.services import import_corpus, open_index
from training.demo import demo_reward_run, queue_demo_reward_model


class Command(BaseCommand):
    help = (
        "Create the demo users (password = user name), load the demo questions and corpus, and queue the "
        "demo's reward model for the training worker. Needs DEBUG=1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--no-reward-model",
            action="store_true",
            help="do not export the demo comparisons and queue the demo reward model's training run",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG:
            raise CommandError(
                "load_demo creates users whose password is their user name; it only runs with DEBUG=1"
            )
        User = get_user_model()
        for username, group, is_admin in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username, defaults={"is_staff": is_admin, "is_superuser": is_admin}
            )
            if created:
                user.set_password(username)
                user.save(update_fields=["password"])
            if group:
                user.groups.add(Group.objects.get_or_create(name=group)[0])
            self.stdout.write(f"user {username}: {'created' if created else 'exists'}")
        for path in DEMO_QUESTION_FILES:
            data = path.read_bytes()
            if QuestionImport.objects.filter(sha256=hashlib.sha256(data).hexdigest()).exists():
                self.stdout.write(f"{path.name}: already loaded")
                continue
            report = import_questions(data, filename=path.name)
            self.stdout.write(
                f"{path.name}: {report.created_count} questions, {report.duplicate_count} duplicates skipped"
            )
        corpus = Corpus.objects.filter(name=DEMO_CORPUS_NAME).first()
        if corpus is not None and open_index(corpus).count() > 0:
            self.stdout.write(f"corpus {DEMO_CORPUS_NAME}: already indexed")
        else:
            corpus_import = import_corpus(DEMO_CORPUS_NAME, DEMO_CORPUS_DIR, source_format="freshwiki")
            self.stdout.write(f"corpus {DEMO_CORPUS_NAME}: {corpus_import.record_count} pages indexed")
        if not DemonstrationBatch.objects.filter(name=DEMO_BATCH_NAME).exists():
            questions = Question.objects.filter(dataset=DEMO_BATCH_DATASET)
            batch = create_demonstration_batch(None, DEMO_BATCH_NAME, questions, corpus=DEMO_CORPUS_NAME)
            self.stdout.write(f"demonstration batch {batch.name!r}: {questions.count()} questions")
        try:
            demo_batches = create_demo_feedback_batches()
        except DemoAnswersError as error:
            # A shipped quote no longer on its page (a re-imported corpus, a renderer change): say which.
            raise CommandError(str(error)) from error
        for batch in demo_batches:
            self.stdout.write(f"feedback batch {batch.name!r}: {batch.items.count()} items")
        self._workforce()
        created = create_reference_comparisons()
        self.stdout.write(f"TruthfulQA reference comparisons (imported, for reward models): {created} new")
        if options["no_reward_model"]:
            return
        run = queue_demo_reward_model()
        if run is not None:
            self.stdout.write(
                f"demo reward model: training run {run.pk} queued on the training worker "
                f"(export {run.export_id}, {run.export.row_count} comparisons of the rm split)"
            )
        elif existing := demo_reward_run():
            self.stdout.write(f"demo reward model: training run {existing.pk} ({existing.status})")

    def _workforce(self) -> None:
        User = get_user_model()
        workforce_demo.qualify_demo_accounts([username for username, _, _ in DEMO_USERS])
        screening = workforce_demo.create_screening_test(User.objects.get(username="researcher"))
        if screening is not None:
            self.stdout.write(
                f"screening test {screening.name!r}: {screening.items.count()} items with references"
            )
        drifter = User.objects.filter(username=workforce_demo.DRIFTER).first()
        gold = workforce_demo.add_gold_checks(drifter)
        if gold is not None:
            self.stdout.write(
                f"gold checks in {gold.name!r}: {gold.items.filter(is_gold=True).count()} gold items "
                f"({workforce_demo.DRIFTER} paused by them)"
            )
