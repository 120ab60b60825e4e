"""The REST API's route table (under /api/), a meeting point on the top floor: it routes every app's API
views; the schema and its docs page are in webgpt_site/urls.py."""

from __future__ import annotations

from django.urls import path

from annotation.api import (
    agreement,
    corpora,
    exports,
    flags,
    quality,
    results,
    tasks,
    team,
    timesheets,
    views,
    workforce,
)
from training.evaluation import evaluation_api as evaluation
from training.evaluation import proxy_api as proxy
from training.evaluation import rounds_api as rounds
from training.judging import api as judging
from training.rl import api as rl
from training.runs import api as training
from training.sampling import api as sampling

urlpatterns = [
    path("questions", views.QuestionList.as_view(), name="api-questions"),
    path("questions/import", views.QuestionImportView.as_view(), name="api-question-import"),
    path("questions/<int:pk>", views.QuestionDetail.as_view(), name="api-question"),
    path("episodes", views.EpisodeList.as_view(), name="api-episodes"),
    path("episodes/<int:pk>", views.EpisodeDetail.as_view(), name="api-episode"),
    path("episodes/<int:pk>/review", quality.EpisodeReview.as_view(), name="api-episode-review"),
    path("me/quality", quality.MyQuality.as_view(), name="api-me-quality"),
    path("answers", views.AnswerList.as_view(), name="api-answers"),
    path("answers/<int:pk>", views.AnswerDetail.as_view(), name="api-answer"),
    path("batches", views.BatchList.as_view(), name="api-batches"),
    path("batches/<int:pk>", views.BatchDetail.as_view(), name="api-batch"),
    path("batches/<int:pk>/results", results.BatchResults.as_view(), name="api-batch-results"),
    path("batches/<int:pk>/flags", flags.BatchFlags.as_view(), name="api-batch-flags"),
    path("batches/<int:pk>/agreement", agreement.BatchAgreement.as_view(), name="api-batch-agreement"),
    path(
        "assignments/<int:pk>/flag-decision",
        flags.AssignmentFlagDecision.as_view(),
        name="api-assignment-flag-decision",
    ),
    path("tasks/next", tasks.TaskNext.as_view(), name="api-task-next"),
    path("tasks/waiting", tasks.TaskWaiting.as_view(), name="api-task-waiting"),
    path("tasks/<int:pk>", tasks.TaskDetail.as_view(), name="api-task"),
    path("tasks/<int:pk>/submit", tasks.TaskSubmit.as_view(), name="api-task-submit"),
    path("tasks/<int:pk>/draft", tasks.TaskDraft.as_view(), name="api-task-draft"),
    path("tasks/<int:pk>/skip", tasks.TaskSkip.as_view(), name="api-task-skip"),
    path("corpora/imports", corpora.CorpusImportList.as_view(), name="api-corpus-imports"),
    path("corpora/imports/<int:pk>", corpora.CorpusImportDetail.as_view(), name="api-corpus-import"),
    path("exports", exports.ExportList.as_view(), name="api-exports"),
    path("exports/<int:pk>", exports.ExportDetail.as_view(), name="api-export"),
    path("exports/<int:pk>/download", exports.ExportDownload.as_view(), name="api-export-download"),
    path("timesheets", timesheets.Timesheets.as_view(), name="api-timesheets"),
    path(
        "timesheets/corrections",
        timesheets.TimesheetCorrections.as_view(),
        name="api-timesheet-corrections",
    ),
    path("training-runs", training.TrainingRunList.as_view(), name="api-training-runs"),
    path("training-runs/<int:pk>", training.TrainingRunDetail.as_view(), name="api-training-run"),
    path(
        "training-runs/<int:pk>/cancel", training.TrainingRunCancel.as_view(), name="api-training-run-cancel"
    ),
    path(
        "training-runs/<int:pk>/resume", training.TrainingRunResume.as_view(), name="api-training-run-resume"
    ),
    path(
        "training-runs/<int:pk>/episodes", rl.TrainingRunEpisodes.as_view(), name="api-training-run-episodes"
    ),
    path("models", training.CheckpointList.as_view(), name="api-models"),
    path("models/<int:pk>", training.CheckpointDetail.as_view(), name="api-model"),
    path("sampling-runs", sampling.SamplingRunList.as_view(), name="api-sampling-runs"),
    path("sampling-runs/<int:pk>", sampling.SamplingRunDetail.as_view(), name="api-sampling-run"),
    path(
        "sampling-runs/<int:pk>/cancel", sampling.SamplingRunCancel.as_view(), name="api-sampling-run-cancel"
    ),
    path("sampling-runs/<int:pk>/samples", sampling.SampleList.as_view(), name="api-sampling-run-samples"),
    path("sampling-endpoints", sampling.BackendList.as_view(), name="api-sampling-endpoints"),
    path("judge-runs", judging.JudgeRunList.as_view(), name="api-judge-runs"),
    path("judge-runs/<int:pk>", judging.JudgeRunDetail.as_view(), name="api-judge-run"),
    path("judge-runs/<int:pk>/cancel", judging.JudgeRunCancel.as_view(), name="api-judge-run-cancel"),
    path(
        "judge-runs/<int:pk>/judgements",
        judging.ModelJudgementList.as_view(),
        name="api-judge-run-judgements",
    ),
    path("proxy-evaluations", proxy.ProxyEvaluationList.as_view(), name="api-proxy-evaluations"),
    path("proxy-evaluations/<int:pk>", proxy.ProxyEvaluationDetail.as_view(), name="api-proxy-evaluation"),
    path(
        "proxy-evaluations/<int:pk>/cancel",
        proxy.ProxyEvaluationCancel.as_view(),
        name="api-proxy-evaluation-cancel",
    ),
    path("benchmark-runs", evaluation.BenchmarkRunList.as_view(), name="api-benchmark-runs"),
    path("benchmark-runs/<int:pk>", evaluation.BenchmarkRunDetail.as_view(), name="api-benchmark-run"),
    path(
        "benchmark-runs/<int:pk>/cancel",
        evaluation.BenchmarkRunCancel.as_view(),
        name="api-benchmark-run-cancel",
    ),
    path("experiment-policies", evaluation.PolicyList.as_view(), name="api-experiment-policies"),
    path("experiments", evaluation.ExperimentList.as_view(), name="api-experiments"),
    path("experiments/<int:pk>", evaluation.ExperimentDetail.as_view(), name="api-experiment"),
    path("team", team.TeamList.as_view(), name="api-team"),
    path("team/<int:pk>/state", team.TeamState.as_view(), name="api-team-state"),
    path("team/invitations/<int:pk>", team.InvitationDetail.as_view(), name="api-team-invitation"),
    path("rounds", rounds.RoundList.as_view(), name="api-rounds"),
    path("rounds/<int:pk>", rounds.RoundDetail.as_view(), name="api-round"),
    path("workforce/paused", workforce.WorkforcePaused.as_view(), name="api-workforce-paused"),
    path(
        "workforce/candidates/<str:kind>",
        workforce.WorkforceCandidates.as_view(),
        name="api-workforce-candidates",
    ),
    path("workforce/kinds/<str:kind>", agreement.WorkforceKind.as_view(), name="api-workforce-kind"),
]
