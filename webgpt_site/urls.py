from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from annotation.api.docs import ApiDocs
from annotation.demonstrations import console as demonstration_console
from annotation.exports import views as export_views
from annotation.feedback import console as feedback_console
from annotation.feedback import flag_review_views as flag_review
from annotation.feedback import results_views as feedback_results
from annotation.workforce import feedback_views as workforce_feedback
from annotation.workforce import invite_views, team_views
from annotation.workforce import timesheet_views as timesheets
from annotation.workforce import views as workforce
from browser import views as corpus_views
from core import account
from webgpt_site import console, queues, views
from webgpt_site.ops import health, metrics

console_patterns = (
    [
        path("", console.home, name="home"),
        path("workers/", console.worker_status, name="workers"),
        path("workers/check/", console.check_workers, name="check_workers"),
        path("providers/check/", console.check_providers, name="check_providers"),
        path("queues/", queues.queues, name="queues"),
        path("demonstrations/", demonstration_console.batches, name="demonstration_batches"),
        path("feedback/", feedback_console.batch_list, name="feedback"),
        path("feedback/new/", feedback_console.batch_create, name="feedback_create"),
        path("feedback/bulk/", feedback_console.batch_bulk, name="feedback_bulk"),
        path("feedback/<int:pk>/", feedback_console.batch_detail, name="feedback_batch"),
        path("feedback/<int:pk>/state/", feedback_console.batch_state, name="feedback_state"),
        path("feedback/<int:pk>/priority/", feedback_console.batch_priority, name="feedback_priority"),
        path("feedback/<int:pk>/results/", feedback_results.results_page, name="feedback_results"),
        path(
            "feedback/<int:pk>/results/<slug:table>.csv",
            feedback_results.results_csv,
            name="feedback_results_csv",
        ),
        path("feedback/<int:pk>/flags/", flag_review.flags_page, name="feedback_flags"),
        path("feedback/<int:pk>/gold/", workforce_feedback.gold_page, name="feedback_gold"),
        path(
            "feedback/<int:pk>/gold/reference/", workforce_feedback.reference_start, name="feedback_reference"
        ),
        path(
            "feedback/judgements/<int:pk>/flag-decision/", flag_review.decide, name="feedback_flag_decision"
        ),
        path("workforce/", workforce.overview, name="workforce"),
        path("workforce/candidates/<str:kind>/", workforce.candidates, name="candidates"),
        path("workforce/kinds/<str:kind>/", workforce.kind_page, name="workforce_kind"),
        path("corpora/", corpus_views.corpus_list, name="corpora"),
        path("corpora/imports/<int:pk>/", corpus_views.corpus_import_detail, name="corpus_import"),
        path("exports/", export_views.export_list, name="exports"),
        path("exports/<int:pk>/", export_views.export_detail, name="export"),
        path("exports/<int:pk>/download/", export_views.export_download, name="export_download"),
        path("team/", team_views.team_page, name="team"),
        path("team/add/", team_views.add_person, name="team_add"),
        path("team/invite/", team_views.invite, name="team_invite"),
        path(
            "team/invitations/<int:pk>/withdraw/",
            team_views.withdraw_invitation,
            name="team_withdraw_invitation",
        ),
        path("team/<int:pk>/", team_views.person_page, name="team_person"),
        path("team/<int:pk>/state/", team_views.person_state, name="team_state"),
        path("team/<int:pk>/qualify-role/", team_views.person_qualify_role, name="team_qualify_role"),
        path("team/<int:pk>/roles/", team_views.person_roles, name="team_roles"),
        path("team/<int:pk>/link/", team_views.person_link, name="team_link"),
        path("workforce/timesheets/", timesheets.timesheets_page, name="timesheets"),
        path("workforce/timesheets.csv", timesheets.timesheets_csv, name="timesheets_csv"),
        path("workforce/timesheets/corrections/", timesheets.correct_time, name="timesheet_correct"),
    ],
    "console",
)

account_patterns = (
    [
        path("token/", account.token_page, name="token"),
        path("token/rotate/", account.token_rotate, name="token_rotate"),
        path("token/revoke/", account.token_revoke, name="token_revoke"),
        path("invite/<str:token>/", invite_views.accept, name="invite"),
    ],
    "account",
)

urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics, name="metrics"),
    path("accounts/login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include(account_patterns)),
    path("console/", include(console_patterns)),
    path("console/questions/", include("annotation.questions.urls")),
    path("console/training/", include("training.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", ApiDocs.as_view(), name="api-docs"),
    path("api/", include("webgpt_site.api_urls")),
    path("", include("annotation.urls")),
    path("admin/", admin.site.urls),
]

# A database outage outside a view is a 503 too; every other error is Django's 500 page.
handler500 = "core.unavailable.server_error"
