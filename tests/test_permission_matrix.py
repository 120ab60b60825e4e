"""Every route of the URL conf x every kind of caller, against the table below.

The routes come from walking the URL conf (tests/routes.py), so a new endpoint fails
``test_every_route_is_in_the_table`` until someone decides who may use it. Each caller opens object
routes on a real object: tasks and episodes belong to bob and dana (or, for erin, to erin herself),
everything else is the research team's (and the flag decisions name frank's flagged judgement).

The world is built once for the module, in a transaction rolled back at its end, and each request runs in
a savepoint rolled back after it. Every caller sends the same valid body (request_for: the page's own form
with the fields a valid request needs, or the API body), so an allowed cell must succeed, not merely get
past the role check, and a refused cell is refused whatever it sends.

Callers: alice researches, bob labels, dana demonstrates, charlie has no role, anonymous has no
account, and erin labelled and demonstrated until her roles were taken away (her work is still there).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.test.utils import override_settings
from django.urls import reverse
from django.utils import timezone

from annotation.demonstrations import service as demos
from annotation.exports.service import run_export_job
from annotation.feedback import assignment as work
from annotation.models import (
    Answer,
    Assignment,
    Episode,
    EpisodeKind,
    EpisodeStatus,
    Export,
    FeedbackBatch,
    FeedbackItem,
    Question,
    SourceKind,
)
from annotation.models.judging import JudgeRun
from annotation.questions.service import import_questions
from annotation.workforce import invitations
from browser.models import Corpus, CorpusImport
from core.permissions import Role
from tests.conftest import make_user
from tests.routes import Route, all_routes, object_kind
from tests.test_fuzz import World, _read_forms, rolled_back_world
from training.checkpoints import state_dir
from training.models import (
    BenchmarkRun,
    Experiment,
    ModelCheckpoint,
    ProxyEvaluation,
    Round,
    Sample,
    SamplingRun,
    TrainingRun,
)

pytestmark = pytest.mark.django_db

# Outcomes. OK: the request went through, with a valid body (request_for): a 2xx or 3xx (but the sign-in
# redirect); the others are the exact refusal.
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
API_TIMESHEETS = (OK, OK, OK, FORBIDDEN, AUTH, FORBIDDEN)  # a labeler or demonstrator: their own rows only
# A task's own actions: labelers, and researchers on their own reference tasks (bob's task: 404 for alice).
TASK_ACTION = (GONE, OK, FORBIDDEN, FORBIDDEN, LOGIN, FORBIDDEN)
API_TASK = (GONE, OK, FORBIDDEN, FORBIDDEN, AUTH, FORBIDDEN)
WORKER = (FORBIDDEN, OK, OK, FORBIDDEN, LOGIN, FORBIDDEN)  # "My quality": labelers and demonstrators
API_WORKER = (FORBIDDEN, OK, OK, FORBIDDEN, AUTH, FORBIDDEN)
# The guidelines pages name a template (and a rating preset), not an object: their URL's arguments.
GUIDELINES = {
    "guidelines": {"template": "webgpt_comparison"},
    "guidelines_preset": {"template": "rating", "preset": "webglm"},
    "work_kind": {"kind": "webgpt_comparison"},
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
    "console:workforce": RESEARCHER,
    "console:candidates": RESEARCHER,
    "console:workforce_kind": RESEARCHER,
    "api-workforce-paused": API_RESEARCHER,
    "api-workforce-candidates": API_RESEARCHER,
    "api-workforce-kind": API_RESEARCHER,
    "console:feedback_results": RESEARCHER,
    "console:feedback_results_csv": RESEARCHER,  # the table the matrix names does not exist: a 400
    "console:feedback_flags": RESEARCHER,
    "console:feedback_flag_decision": RESEARCHER,  # on bob's task, not flagged: a 400
    "console:feedback_gold": RESEARCHER,
    "console:feedback_reference": RESEARCHER,
    "console:exports": RESEARCHER,
    "console:export": RESEARCH_OBJECT,
    "console:export_download": RESEARCH_OBJECT,
    "console:corpora": RESEARCHER,
    "console:timesheets": RESEARCHER,
    "console:timesheets_csv": RESEARCHER,
    "console:timesheet_correct": RESEARCHER,
    "console:corpus_import": RESEARCH_OBJECT,
    "console:team": RESEARCHER,
    "console:team_add": RESEARCHER,
    "console:team_invite": RESEARCHER,
    "console:team_person": RESEARCHER,  # any account: the researcher's role is checked first
    "console:team_state": RESEARCHER,
    "console:team_qualify_role": RESEARCHER,
    "console:team_roles": RESEARCHER,
    "console:team_link": RESEARCHER,  # gwen's account has no password yet: a new link
    "console:team_withdraw_invitation": RESEARCH_OBJECT,  # the research team's: to others it does not exist
    "account:invite": PUBLIC,  # the invitation's page: whoever has the link (signed in or not)
    "questions:list": RESEARCHER,
    "questions:detail": RESEARCH_OBJECT,
    "questions:import": RESEARCHER,
    "questions:import_detail": RESEARCH_OBJECT,
    "training:runs": RESEARCHER,
    "training:new": RESEARCHER,
    "training:rl_new": RESEARCHER,
    "training:compare": RESEARCHER,
    "training:run": RESEARCH_OBJECT,
    "training:cancel": RESEARCH_OBJECT,
    "training:resume": RESEARCH_OBJECT,
    "training:rl_episodes": RESEARCH_OBJECT,
    "training:models": RESEARCHER,
    "training:delete_model": RESEARCH_OBJECT,
    "training:sampling_runs": RESEARCHER,
    "training:sampling_new": RESEARCHER,
    "training:sampling_run": RESEARCH_OBJECT,
    "training:sampling_cancel": RESEARCH_OBJECT,
    "training:judge_new": RESEARCHER,
    "training:judge_run": RESEARCH_OBJECT,
    "training:judge_cancel": RESEARCH_OBJECT,
    "training:benchmarks": RESEARCHER,
    "training:benchmark_new": RESEARCHER,
    "training:benchmark": RESEARCH_OBJECT,
    "training:benchmark_cancel": RESEARCH_OBJECT,
    "training:experiments": RESEARCHER,
    "training:experiment_demo": RESEARCHER,
    "training:experiment": RESEARCH_OBJECT,
    "training:experiment_json": RESEARCH_OBJECT,
    "training:experiment_csv": RESEARCH_OBJECT,
    "training:experiment_html": RESEARCH_OBJECT,
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
    "api-episode-review": API_RESEARCHER,  # dana's episode, finished first (PREPARE)
    "api-me-quality": API_WORKER,
    "api-answers": API_RESEARCHER,
    "api-answer": API_RESEARCH_OBJECT,
    "api-batches": API_RESEARCHER,
    "api-batch": API_RESEARCH_OBJECT,
    "api-batch-results": API_RESEARCH_OBJECT,
    "api-batch-flags": API_RESEARCH_OBJECT,
    "api-batch-agreement": API_RESEARCH_OBJECT,
    "api-assignment-flag-decision": API_RESEARCHER,
    "api-task-next": API_LABELER,
    "api-task-waiting": API_LABELER,
    "api-task": API_TASK,
    "api-task-submit": API_TASK,
    "api-task-draft": API_TASK,
    "api-task-skip": API_TASK,
    "api-exports": API_RESEARCHER,
    "api-export": API_RESEARCH_OBJECT,
    "api-corpus-imports": API_RESEARCHER,
    "api-corpus-import": API_RESEARCH_OBJECT,
    "api-export-download": API_RESEARCH_OBJECT,
    "api-training-runs": API_RESEARCHER,
    "api-training-run": API_RESEARCH_OBJECT,
    "api-training-run-cancel": API_RESEARCH_OBJECT,
    "api-training-run-resume": API_RESEARCH_OBJECT,
    "api-training-run-episodes": API_RESEARCH_OBJECT,
    "api-sampling-runs": API_RESEARCHER,
    "api-sampling-run": API_RESEARCH_OBJECT,
    "api-sampling-run-cancel": API_RESEARCH_OBJECT,
    "api-sampling-run-samples": API_RESEARCH_OBJECT,
    "api-sampling-endpoints": API_RESEARCHER,
    "api-judge-runs": API_RESEARCHER,
    "api-judge-run": API_RESEARCH_OBJECT,
    "api-judge-run-cancel": API_RESEARCH_OBJECT,
    "api-judge-run-judgements": API_RESEARCH_OBJECT,
    "api-proxy-evaluations": API_RESEARCHER,
    "api-benchmark-runs": API_RESEARCHER,
    "api-benchmark-run": API_RESEARCH_OBJECT,
    "api-benchmark-run-cancel": API_RESEARCH_OBJECT,
    "api-experiment-policies": API_RESEARCHER,
    "api-experiments": API_RESEARCHER,
    "api-experiment": API_RESEARCH_OBJECT,
    "api-proxy-evaluation": API_RESEARCH_OBJECT,
    "api-proxy-evaluation-cancel": API_RESEARCH_OBJECT,
    "api-team": API_RESEARCHER,
    "api-team-state": API_RESEARCHER,  # the role first, then the person (a 404 for a researcher only)
    "api-team-invitation": API_RESEARCH_OBJECT,
    "api-rounds": API_RESEARCHER,
    "api-round": API_RESEARCH_OBJECT,
    "api-models": API_RESEARCHER,
    "api-timesheets": API_TIMESHEETS,
    "api-timesheet-corrections": API_RESEARCHER,
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
    "annotation:episode_review": RESEARCHER,  # dana's episode, finished first (PREPARE)
    "annotation:my_quality": WORKER,
    "annotation:next_task": LABELER,
    "annotation:task_start": LABELER,
    "annotation:task": TASK_PAGE,
    "annotation:task_draft": TASK_ACTION,
    "annotation:task_submit": TASK_ACTION,
    "annotation:task_skip": TASK_ACTION,
    "annotation:task_heartbeat": TASK_ACTION,
    "annotation:task_step_page": TASK_PAGE,  # the demo's step review, bob's and erin's (own "step_task")
    "annotation:guidelines": LABELER_OR_RESEARCHER,
    "annotation:template_guidelines": LABELER_OR_RESEARCHER,
    "annotation:preset_guidelines": LABELER_OR_RESEARCHER,
}


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, freshwiki_index_dir):
    """One of everything, built once for the module in a transaction rolled back at its end, and erin:
    she took a task and started an episode, then lost both roles."""
    tmp = tmp_path_factory.mktemp("matrix")
    with rolled_back_world(django_db_blocker, tmp, freshwiki_index_dir):
        yield _build_world(tmp)


def _build_world(tmp) -> tuple[dict, dict, dict]:
    corpus = Corpus.objects.create(name="freshwiki", document_count=100)
    with override_settings(DEBUG=True):  # what `make run` loads (load_demo needs DEBUG)
        call_command("load_demo", "--no-reward-model", verbosity=0)
    FeedbackBatch.objects.update(required_probability=0.0)  # bob's task never draws "everything required"
    users = {"anonymous": None}
    for name, *roles in (
        ("alice", "researcher"),
        ("bob", "labeler"),
        ("dana", "demonstrator"),
        ("charlie",),
        ("erin", "labeler", "demonstrator"),
    ):
        users[name] = make_user(User, name, *roles)
    alice = users["alice"]
    report = import_questions(b'{"question": "Who won the 2022 AFL Grand Final?"}', filename="q.jsonl")
    Question.objects.update(split="bc")
    export = run_export_job(Export.objects.create(export_format="bc-pairs").pk)
    run = TrainingRun.objects.create(kind="rm", export=export, owner=alice)
    failed_run = TrainingRun.objects.create(kind="rm", export=export, owner=alice, status="failed")
    (state_dir(failed_run.pk) / "checkpoint-2").mkdir(parents=True)  # it can continue
    folder = tmp / "models" / "tiny"
    folder.mkdir(parents=True)
    checkpoint = ModelCheckpoint.objects.create(kind="rm", name="tiny", base_model="x", path=str(folder))
    own = {}
    for name in ("bob", "dana", "erin"):
        user = users[name]
        task = work.next_assignment(user) if name != "dana" else None
        episode = demos.next_episode(user) if name != "bob" else None
        assert (task or episode) is not None, f"{user} got no work"
        if name == "dana":  # a search, so the episode has a page to show (page_snapshot)
            demos.record_action(episode.pk, user, "Search AFL Grand Final", uuid.uuid4(), episode.version)
            episode.refresh_from_db()
        own[name] = {"task": task, "episode": episode}
    # A step review of the demo's scripted episodes for bob and erin (the whole page of a step).
    step_item = FeedbackItem.objects.filter(batch__template="step_review").first()
    for name in ("bob", "erin"):
        own[name]["step_task"] = Assignment.objects.create(
            item=step_item, labeler=users[name], order=[], leased_until=timezone.now()
        )
    users["erin"].groups.clear()
    # A judgement flagged for review (frank's, submitted), for the flag decisions.
    frank = make_user(User, "frank", "labeler")
    item = FeedbackItem.objects.filter(batch__template="webgpt_comparison").exclude(
        assignments__isnull=False
    )[0]
    flagged = Assignment.objects.create(
        item=item,
        labeler=frank,
        order=list(item.answers.order_by("id").values_list("id", flat=True)),
        status="submitted",
        response={"ratings": {"overall": "a_better", "coherence": "b_much_better"}},
        flags=["overall_contradicts_dimensions"],
        submitted_at=timezone.now(),
        leased_until=timezone.now(),
    )
    # Gwen: an account made on the team page, still without a password, and an open invitation.
    gwen, _ = invitations.add_person(alice, "gwen", "", [Role.LABELER])
    shared = {
        "person": gwen,
        "invitation": invitations.invite(alice, [Role.LABELER], "matrix").token,
        "pending_invitation": invitations.invite(alice, [Role.LABELER], "matrix, to withdraw").invitation,
        "flagged": flagged,
        "batch": FeedbackBatch.objects.first(),
        "export": export,
        "corpus_import": CorpusImport.objects.create(corpus=corpus, source="w.jsonl", source_format="jsonl"),
        "question": report.questions.get(),
        "import": report,
        "run": run,
        "failed_run": failed_run,
        "checkpoint": checkpoint,
        "sampling_run": SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1),
        "finished": _finished_run(alice, report.questions.get()),
        "answer": Answer.objects.first(),
        "round": Round.objects.create(number=1, name="round one"),
        "proxy_evaluation": ProxyEvaluation.objects.create(
            owner=alice, reward_model=checkpoint, reward_model_name=checkpoint.name
        ),
        "judge_run": JudgeRun.objects.create(
            owner=alice, batch=FeedbackBatch.objects.first(), judge_kind="reward_model", judge_name="tiny"
        ),
        "benchmark_run": BenchmarkRun.objects.create(
            owner=alice,
            benchmark="triviaqa",
            sampling_run=SamplingRun.objects.create(owner=alice, policy_name="tiny", n=1, episodes_total=1),
        ),
        "experiment": Experiment.objects.create(name="matrix", policies=[TINY_POLICY]),
    }
    # A TriviaQA question for the benchmark form to answer.
    Question.objects.create(
        text="Which river flows through Vienna?", key="tq", dataset="triviaqa", split="eval"
    )
    # What each page's forms send (hidden keys, versions, chosen options), for the routes they post to.
    forms = World(users, {})
    for caller in ("alice", "bob", "dana"):
        client = Client()
        client.force_login(users[caller])
        for route in all_routes():
            if "GET" in route.methods and not route.is_api:
                _read_forms(forms, client, url_for(route, caller, shared, own))
    return users, shared, own, forms.defaults


TINY_POLICY = {"policy_name": "tiny", "n": 1, "reward_model_name": ""}  # _finished_run's policy


def _finished_run(alice, question: Question) -> SamplingRun:
    """A sampling run that finished with one answered sample (what a proxy evaluation scores)."""
    run = SamplingRun.objects.create(
        owner=alice, policy_name="tiny", n=1, episodes_total=1, status="done", finished_at=timezone.now()
    )
    episode = Episode.objects.create(
        kind=EpisodeKind.MODEL,
        policy=run.policy_name,
        question=question,
        status=EpisodeStatus.FINISHED,
        corpus="freshwiki",
        settings={},
        state={"quotes": []},
        answer="Geelong won it.",
    )
    Sample.objects.create(run=run, episode=episode, question=question, index=0)
    return run


@pytest.fixture
def matrix(world, settings, freshwiki_index_dir):
    """Per test (the autouse fixtures move the index folder): the world's index."""
    settings.CORPUS_INDEX_DIR = freshwiki_index_dir
    return world


# Valid bodies. Page forms: what the page's own form sends (read from the page, as the fuzz test does:
# hidden keys, versions, chosen options, the first button), with these fields on top. API: these bodies.
PAGE_FIELDS: dict[str, Any] = {
    "console:feedback_create": lambda s, o: {"name": "matrix batch", "source": "bank", "runs": []},
    "console:demonstration_batches": lambda s, o: {"name": "Matrix", "split": "bc", "limit": 1, "overlap": 1},
    "console:corpora": lambda s, o: {"corpus": "matrix", "file": _upload("pages.jsonl", PAGE)},
    "training:new": lambda s, o: {"kind": "bc", "export": s["export"].pk},
    "training:rl_new": lambda s, o: {"reward_model": s["checkpoint"].pk},
    "training:sampling_new": lambda s, o: {"split": "bc", "limit": 1},
    "training:proxy_evaluations": lambda s, o: {
        "reward_model": s["checkpoint"].pk,
        "runs": [s["finished"].pk],
    },
    "training:benchmark_new": lambda s, o: {"benchmark": "triviaqa", "questions": 1},
    "training:experiments": lambda s, o: {
        "name": "matrix report",
        "policies": [json.dumps(TINY_POLICY, sort_keys=True)],
    },
    "console:feedback_bulk": lambda s, o: {"batches": [s["batch"].pk], "action": "pause"},
    "console:feedback_state": lambda s, o: {"action": "pause"},
    "console:feedback_priority": lambda s, o: {"priority": "2"},
    "questions:import": lambda s, o: {"file": _upload("q.jsonl", b'{"question": "Is the sky blue?"}')},
    "annotation:draft": lambda s, o: {"answer": "Geelong won the 2022 AFL Grand Final."},
    "annotation:episode_review": lambda s, o: {"grade": "6", "comment": "Well sourced."},
    "console:feedback_gold": lambda s, o: {
        "item": _gold_item(s).pk,
        "explanation": "Why the reference holds.",
    },
    "console:feedback_reference": lambda s, o: {"item": _gold_item(s).pk},
    "training:round_create": lambda s, o: {"name": "round two", "sampling_runs": [s["sampling_run"].pk]},
    "training:round_add_runs": lambda s, o: {"sampling_runs": [s["sampling_run"].pk]},
    "console:team_add": lambda s, o: {"add-username": "matrix", "add-roles": ["labeler"], "add-days": "7"},
    "console:team_invite": lambda s, o: {"invite-roles": ["labeler"], "invite-days": "7"},
    "console:team_state": lambda s, o: {"kind": "webgpt_comparison", "action": "qualify", "reason": "matrix"},
    "console:team_qualify_role": lambda s, o: {"role": "labeler", "reason": "matrix"},
    "console:team_roles": lambda s, o: {"role": "demonstrator", "action": "grant"},
    "account:invite": lambda s, o: {"username": "newcomer", "password1": PASSWORD, "password2": PASSWORD},
    "console:timesheet_correct": lambda s, o: {
        "user": "bob",
        "day": timezone.localdate().isoformat(),
        "minutes": 30,
        "reason": "matrix",
    },
}
PASSWORD = "a long unusual passphrase 71"
QUERY: dict[str, Any] = {
    "training:compare": lambda s, o: {"run": [s["run"].pk]},
    "annotation:page_snapshot": lambda s, o: {"digest": next(iter(o["dana"]["episode"].state["pages"]))},
}


def _at_the_answer_step(shared: dict, own: dict) -> None:
    """Dana's episode (which searched) quotes a page and ends its browsing, inside the request's savepoint:
    a draft is for the answer step."""
    dana = own["dana"]["episode"].user
    for command in ("Clicked on link 0", "Quote: won by Geelong", "End: Answer"):
        episode = Episode.objects.get(pk=own["dana"]["episode"].pk)
        demos.record_action(episode.pk, dana, command, uuid.uuid4(), episode.version)
    assert Episode.objects.get(pk=episode.pk).status == EpisodeStatus.ANSWERING


def _finished(shared: dict, own: dict) -> None:
    """Dana's episode finished (a review is of a finished demonstration), inside the request's savepoint."""
    Episode.objects.filter(pk=own["dana"]["episode"].pk).update(status=EpisodeStatus.FINISHED)


def _gold_item(shared: dict) -> FeedbackItem:
    """A gold item of the shared batch (made gold in the request's savepoint by PREPARE)."""
    return FeedbackItem.objects.filter(batch=shared["batch"]).order_by("id").first()


def _gold(shared: dict, own: dict) -> None:
    FeedbackItem.objects.filter(pk=_gold_item(shared).pk).update(
        is_gold=True, gold_expected={"preference": 1.0}
    )


def _rl_question(shared: dict, own: dict) -> None:
    """A question of the rl split with an answer to quote from: what an RL run trains on."""
    question = Question.objects.create(text="Why is the sky blue?", key="matrix-rl", split="rl")
    quote = {"title": "Sky", "url": "https://example.org/", "domain": "example.org", "extract": "Blue."}
    Answer.objects.create(question=question, text="Scattering.", quotes=[quote], source_kind=SourceKind.MODEL)


# Set up inside the request's savepoint (rolled back with it), for routes that need the world in a state
# the other routes must not see.
PREPARE = {
    "training:rl_new": _rl_question,
    "annotation:draft": _at_the_answer_step,
    "annotation:episode_review": _finished,
    "api-episode-review": _finished,
    "console:feedback_gold": _gold,
}
API_BODIES: dict[str, Any] = {
    "api-question-import": lambda s, o: {"file": _upload("q.jsonl", b'{"question": "Is the sky blue?"}')},
    "api-batches": lambda s, o: {"name": "API batch", "template": "webgpt_comparison", "source": "bank"},
    "api-assignment-flag-decision": lambda s, o: {"decision": "keep", "note": "fine"},
    "api-corpus-imports": lambda s, o: {
        "corpus": "matrix",
        "format": "jsonl",
        "file": _upload("w.jsonl", b'{"title": "A", "text": "B"}'),
    },
    "api-exports": lambda s, o: {"format": "comparisons-full"},
    "api-training-runs": lambda s, o: {"kind": "bc", "export": s["export"].pk},
    "api-sampling-runs": lambda s, o: {"questions": {"split": "bc", "limit": 1}},
    "api-proxy-evaluations": lambda s, o: {"reward_model": s["checkpoint"].pk, "runs": [s["finished"].pk]},
    "api-benchmark-runs": lambda s, o: {"benchmark": "triviaqa", "limit": 1},
    "api-experiments": lambda s, o: {"name": "matrix report", "policies": [TINY_POLICY]},
    "api-rounds": lambda s, o: {"sampling_runs": [s["sampling_run"].pk]},
    "api-judge-runs": lambda s, o: {"batch": s["batch"].pk, "reward_model": s["checkpoint"].pk},
    "api-task-submit": lambda s, o: {
        "response": {"ratings": {"overall": "a_better"}},
        "key": "9b2f2a4e-4d1c-4e7a-9a43-3f0c9a6c2b11",
    },
    "api-task-draft": lambda s, o: {"draft": {}},
    "api-task-skip": lambda s, o: {"reason": "I do not know this topic"},
    "api-team-state": lambda s, o: {"kind": "webgpt_comparison", "action": "qualify", "reason": "matrix"},
    "api-timesheet-corrections": lambda s, o: {
        "user": "bob",
        "day": timezone.localdate().isoformat(),
        "minutes": 30,
        "reason": "matrix",
    },
    "api-episode-review": lambda s, o: {"grade": 6, "comment": "Well sourced."},
}
MULTIPART = {"api-question-import", "api-corpus-imports"}
PAGE = b'{"url": "https://example.org/alpha", "title": "Alpha", "text": "alpha bravo charlie"}\n'
URL_KWARGS = {
    "console:feedback_results_csv": {"table": "preference"},
    "annotation:task_step_page": {"index": 0},
}


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def request_for(route: Route, method: str, url: str, matrix: tuple) -> tuple[str, dict]:
    """The URL and the test client's keyword arguments for a valid request."""
    _, shared, own, defaults = matrix
    if method in ("GET", "DELETE"):
        query = QUERY.get(route.name)
        return url, {"data": query(shared, own)} if query else {}
    if route.is_api:
        body = API_BODIES.get(route.name)
        if body is None:
            return url, {}
        if route.name in MULTIPART:
            return url, {"data": body(shared, own)}
        return url, {"data": json.dumps(body(shared, own)), "content_type": "application/json"}
    fields = PAGE_FIELDS.get(route.name, lambda s, o: {})(shared, own)
    return url, {"data": {**defaults.get((url, method), {}), **fields}}


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
    if route.name in FLAG_DECISIONS:
        return route.url(pk=shared["flagged"])
    if kind in GUIDELINES:
        return route.url(**GUIDELINES[kind])
    if kind == "invitation":
        return route.url(token=shared["invitation"])
    if kind == "task":
        key = "step_task" if route.name == "annotation:task_step_page" else "task"
        target = (own["erin"] if caller == "erin" else own["bob"])[key]
    elif kind == "episode":
        target = (own["erin"] if caller == "erin" else own["dana"])["episode"]
    else:
        target = shared[kind]
    assert target is not None, (route.name, kind)
    return route.url(pk=target, **URL_KWARGS.get(route.name, {}))


FLAG_DECISIONS = {"console:feedback_flag_decision", "api-assignment-flag-decision"}


def test_every_route_is_in_the_table():
    names = [route.name for route in all_routes()]
    assert None not in names, "every route needs a name to be in the permission table"
    assert sorted(set(names) - set(EXPECTED)) == [], "new routes: add them to EXPECTED"
    assert sorted(set(EXPECTED) - set(names)) == [], "routes that no longer exist: remove them"


@pytest.mark.parametrize("caller", CALLERS)
def test_each_caller_gets_what_the_table_says_on_every_route_and_method(matrix, caller):
    users = matrix[0]
    shared, own = matrix[1], matrix[2]
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
                if route.name in PREPARE:
                    PREPARE[route.name](shared, own)
                target, kwargs = request_for(route, method, url, matrix)
                response = getattr(client, method.lower())(target, **kwargs)
                transaction.set_rollback(True)
            got = outcome(response, route)
            if got == OK and not 200 <= response.status_code < 400:
                got = response.status_code  # let through, but its valid body was not taken
            if got != expected:
                wrong.append(f"{method} {url} ({route.name}): expected {expected}, got {got}")
    assert not wrong, "\n".join(wrong)
