"""Every route of the URL conf x every kind of caller, against the table below.

The routes come from walking the URL conf (tests/routes.py), so a new endpoint fails
``test_every_route_is_in_the_table`` until someone decides who may use it. Each caller opens object
routes on a real object: tasks and episodes belong to bob and dana (or, for erin, to erin herself),
everything else is the research team's.

Callers: alice researches, bob labels, dana demonstrates, charlie has no role, anonymous has no
account, and erin labelled and demonstrated until her roles were taken away (her work is still there).
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from annotation.demonstrations import service as demos
from annotation.exports.service import run_export_job
from annotation.feedback import assignment as work
from annotation.models import Answer, Export, FeedbackBatch, Question
from annotation.questions.service import import_questions
from browser.models import CorpusImport
from tests.conftest import make_user
from tests.routes import Route, all_routes, object_kind
from training.models import ModelCheckpoint, ProxyEvaluation, Round, SamplingRun, TrainingRun

pytestmark = pytest.mark.django_db

# Outcomes. OK: the role check let the request through (any answer that is not a refusal and not a 5xx:
# an empty body may well be a 400); the others are the exact refusal.
OK, LOGIN, AUTH, FORBIDDEN, GONE = "ok", "302 to login", 401, 403, 404
CALLERS = ("alice", "bob", "dana", "charlie", "anonymous", "erin")

PUBLIC = (OK, OK, OK, OK, OK, OK)
SIGNED_IN = (OK, OK, OK, OK, LOGIN, OK)
RESEARCHER = (OK, FORBIDDEN, FORBIDDEN, FORBIDDEN, LOGIN, FORBIDDEN)
RESEARCH_OBJECT = (OK, GONE, GONE, GONE, LOGIN, GONE)  # not theirs to see: it does not exist
DEMONSTRATOR = (FORBIDDEN, FORBIDDEN, OK, FORBIDDEN, LOGIN, FORBIDDEN)
EPISODE_PAGE = (OK, GONE, OK, GONE, LOGIN, GONE)  # researchers read every episode, read-only
LABELER = (FORBIDDEN, OK, FORBIDDEN, FORBIDDEN, LOGIN, FORBIDDEN)
TASK_PAGE = (OK, OK, GONE, GONE, LOGIN, GONE)  # researchers read every task, read-only
API_SIGNED_IN = (OK, OK, OK, OK, AUTH, OK)
API_RESEARCHER = (OK, FORBIDDEN, FORBIDDEN, FORBIDDEN, AUTH, FORBIDDEN)
API_RESEARCH_OBJECT = (OK, GONE, GONE, GONE, AUTH, GONE)
API_EPISODES = (OK, FORBIDDEN, OK, FORBIDDEN, AUTH, FORBIDDEN)
API_EPISODE = (OK, GONE, OK, GONE, AUTH, GONE)
API_LABELER = (FORBIDDEN, OK, FORBIDDEN, FORBIDDEN, AUTH, FORBIDDEN)
LABELER_OR_RESEARCHER = (OK, OK, FORBIDDEN, FORBIDDEN, LOGIN, FORBIDDEN)  # the labelers' guidelines
# The guidelines pages name a template (and a rating preset), not an object: their URL's arguments.
GUIDELINES = {
    "guidelines": {"template": "webgpt_comparison"},
    "guidelines_preset": {"template": "rating", "preset": "webglm"},
}

EXPECTED: dict[str, tuple] = {
    # route name                        alice, bob, dana, charlie, anonymous, erin
    "home": SIGNED_IN,
    "favicon": PUBLIC,
    "healthz": PUBLIC,  # load balancers have no account
    "readyz": PUBLIC,
    "metrics": (OK, GONE, GONE, GONE, GONE, GONE),  # researchers, or Prometheus with METRICS_TOKEN
    "login": PUBLIC,
    "logout": PUBLIC,
    "account:token": SIGNED_IN,
    "account:token_rotate": SIGNED_IN,
    "account:token_revoke": SIGNED_IN,
    "console:home": RESEARCHER,
    "console:workers": RESEARCHER,
    "console:check_workers": RESEARCHER,
    "console:check_providers": RESEARCHER,
    "console:queues": (FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, LOGIN, FORBIDDEN),  # staff only
    "console:demonstration_batches": RESEARCHER,
    "console:feedback": RESEARCHER,
    "console:feedback_create": RESEARCHER,
    "console:feedback_bulk": RESEARCHER,
    "console:feedback_batch": RESEARCHER,
    "console:feedback_state": RESEARCHER,
    "console:feedback_priority": RESEARCHER,
    "console:feedback_results": RESEARCHER,
    "console:feedback_results_csv": RESEARCHER,  # the table the matrix names does not exist: a 400
    "console:feedback_flags": RESEARCHER,
    "console:feedback_flag_decision": RESEARCHER,  # on bob's task, not flagged: a 400
    "console:exports": RESEARCHER,
    "console:export": RESEARCH_OBJECT,
    "console:export_download": RESEARCH_OBJECT,
    "console:corpora": RESEARCHER,
    "console:corpus_import": RESEARCH_OBJECT,
    "questions:list": RESEARCHER,
    "questions:detail": RESEARCH_OBJECT,
    "questions:import": RESEARCHER,
    "questions:import_detail": RESEARCH_OBJECT,
    "training:runs": RESEARCHER,
    "training:new": RESEARCHER,
    "training:compare": RESEARCHER,
    "training:run": RESEARCH_OBJECT,
    "training:cancel": RESEARCH_OBJECT,
    "training:models": RESEARCHER,
    "training:delete_model": RESEARCH_OBJECT,
    "training:sampling_runs": RESEARCHER,
    "training:sampling_new": RESEARCHER,
    "training:sampling_run": RESEARCH_OBJECT,
    "training:sampling_cancel": RESEARCH_OBJECT,
    "training:proxy_evaluations": RESEARCHER,
    "training:proxy_evaluation": RESEARCH_OBJECT,
    "training:proxy_results_csv": RESEARCH_OBJECT,
    "training:proxy_cancel": RESEARCH_OBJECT,
    "training:rounds": RESEARCHER,
    "training:round_create": RESEARCHER,
    "training:rounds_csv": RESEARCHER,
    "training:round": RESEARCH_OBJECT,
    "training:round_add_runs": RESEARCH_OBJECT,
    "training:round_retrain": RESEARCH_OBJECT,
    "api-schema": API_SIGNED_IN,
    "api-docs": SIGNED_IN,  # a page: anonymous callers are sent to sign in, like the schema's 401
    "api-questions": API_RESEARCHER,
    "api-question-import": API_RESEARCHER,
    "api-question": API_RESEARCH_OBJECT,
    "api-episodes": API_EPISODES,
    "api-episode": API_EPISODE,
    "api-answers": API_RESEARCHER,
    "api-answer": API_RESEARCH_OBJECT,
    "api-batches": API_RESEARCHER,
    "api-batch": API_RESEARCH_OBJECT,
    "api-batch-results": API_RESEARCH_OBJECT,
    "api-batch-flags": API_RESEARCH_OBJECT,
    "api-assignment-flag-decision": API_RESEARCHER,
    "api-task-next": API_LABELER,
    "api-task-waiting": API_LABELER,
    "api-task": API_LABELER,
    "api-task-submit": API_LABELER,
    "api-task-draft": API_LABELER,
    "api-task-skip": API_LABELER,
    "api-exports": API_RESEARCHER,
    "api-export": API_RESEARCH_OBJECT,
    "api-corpus-imports": API_RESEARCHER,
    "api-corpus-import": API_RESEARCH_OBJECT,
    "api-export-download": API_RESEARCH_OBJECT,
    "api-training-runs": API_RESEARCHER,
    "api-training-run": API_RESEARCH_OBJECT,
    "api-training-run-cancel": API_RESEARCH_OBJECT,
    "api-sampling-runs": API_RESEARCHER,
    "api-sampling-run": API_RESEARCH_OBJECT,
    "api-sampling-run-cancel": API_RESEARCH_OBJECT,
    "api-sampling-run-samples": API_RESEARCH_OBJECT,
    "api-sampling-endpoints": API_RESEARCHER,
    "api-proxy-evaluations": API_RESEARCHER,
    "api-proxy-evaluation": API_RESEARCH_OBJECT,
    "api-proxy-evaluation-cancel": API_RESEARCH_OBJECT,
    "api-rounds": API_RESEARCHER,
    "api-round": API_RESEARCH_OBJECT,
    "api-models": API_RESEARCHER,
    "api-model": API_RESEARCH_OBJECT,
    "annotation:next_question": DEMONSTRATOR,
    "annotation:start": DEMONSTRATOR,
    "annotation:history": DEMONSTRATOR,
    "annotation:instructions": SIGNED_IN,
    "annotation:episode": EPISODE_PAGE,
    "annotation:page_snapshot": EPISODE_PAGE,
    "annotation:act": DEMONSTRATOR,
    "annotation:remove_quote": DEMONSTRATOR,
    "annotation:heartbeat": DEMONSTRATOR,
    "annotation:draft": DEMONSTRATOR,
    "annotation:answer": DEMONSTRATOR,
    "annotation:browse_again": DEMONSTRATOR,
    "annotation:note": DEMONSTRATOR,
    "annotation:skip": DEMONSTRATOR,
    "annotation:next_task": LABELER,
    "annotation:task_start": LABELER,
    "annotation:task": TASK_PAGE,
    "annotation:task_draft": LABELER,
    "annotation:task_submit": LABELER,
    "annotation:task_skip": LABELER,
    "annotation:task_heartbeat": LABELER,
    "annotation:guidelines": LABELER_OR_RESEARCHER,
    "annotation:template_guidelines": LABELER_OR_RESEARCHER,
    "annotation:preset_guidelines": LABELER_OR_RESEARCHER,
}


@pytest.fixture
def world(
    freshwiki, demo_data, alice, bob, dana, charlie, django_user_model, settings, tmp_path, model_store
):
    """One of everything, and erin: she took a task and started an episode, then lost both roles."""
    settings.MEDIA_ROOT = tmp_path / "media"
    erin = make_user(django_user_model, "erin", "labeler", "demonstrator")
    report = import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    export = run_export_job(Export.objects.create(export_format="bc-pairs").pk)
    run = TrainingRun.objects.create(kind="rm", export=export, owner=alice)
    folder = model_store / "tiny"
    folder.mkdir(parents=True)
    checkpoint = ModelCheckpoint.objects.create(kind="rm", name="tiny", base_model="x", path=str(folder))
    own = {}
    for user in (bob, dana, erin):
        task = work.next_assignment(user) if user is not dana else None
        episode = demos.next_episode(user) if user is not bob else None
        assert (task or episode) is not None, f"{user} got no work"
        own[user.username] = {"task": task, "episode": episode}
    erin.groups.clear()
    shared = {
        "batch": FeedbackBatch.objects.first(),
        "export": export,
        "corpus_import": CorpusImport.objects.create(
            corpus=freshwiki, source="w.jsonl", source_format="jsonl"
        ),
        "question": report.questions.get(),
        "import": report,
        "run": run,
        "checkpoint": checkpoint,
        "sampling_run": SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1),
        "answer": Answer.objects.first(),
        "round": Round.objects.create(number=1, name="round one"),
        "proxy_evaluation": ProxyEvaluation.objects.create(
            owner=alice, reward_model=checkpoint, reward_model_name=checkpoint.name
        ),
    }
    users = {"alice": alice, "bob": bob, "dana": dana, "charlie": charlie, "anonymous": None, "erin": erin}
    return users, shared, own


def outcome(response, route: Route) -> str | int:
    """The refusal a response is, or OK."""
    if response.status_code == 302 and response.url.startswith(reverse("login") + "?next="):
        return LOGIN
    if response.status_code in (AUTH, FORBIDDEN, GONE, 405):
        return response.status_code
    assert response.status_code < 500, (route.name, response.status_code)
    return OK


def url_for(route: Route, caller: str, shared: dict, own: dict) -> str:
    if not route.params:
        return route.url()
    kind = object_kind(route)
    if kind in GUIDELINES:
        return route.url(**GUIDELINES[kind])
    if kind == "task":
        target = (own["erin"] if caller == "erin" else own["bob"])["task"]
    elif kind == "episode":
        target = (own["erin"] if caller == "erin" else own["dana"])["episode"]
    else:
        target = shared[kind]
    assert target is not None, (route.name, kind)
    return route.url(pk=target)


def test_every_route_is_in_the_table():
    names = [route.name for route in all_routes()]
    assert None not in names, "every route needs a name to be in the permission table"
    assert sorted(set(names) - set(EXPECTED)) == [], "new routes: add them to EXPECTED"
    assert sorted(set(EXPECTED) - set(names)) == [], "routes that no longer exist: remove them"


@pytest.mark.parametrize("caller", CALLERS)
def test_each_caller_gets_what_the_table_says_on_every_route_and_method(world, caller):
    users, shared, own = world
    wrong = []
    for route in all_routes():
        expected = EXPECTED.get(route.name, (None,) * len(CALLERS))[CALLERS.index(caller)]
        url = url_for(route, caller, shared, own)
        for method in route.methods:
            client = Client()
            if users[caller] is not None:
                client.force_login(users[caller])
            # Each request in a savepoint rolled back after it: a POST that deletes or closes something
            # (a model, a task) leaves the world as it was for the next route.
            with transaction.atomic():
                response = getattr(client, method.lower())(url)
                transaction.set_rollback(True)
            got = outcome(response, route)
            if got != expected:
                wrong.append(f"{method} {url} ({route.name}): expected {expected}, got {got}")
    assert not wrong, "\n".join(wrong)
