from django.urls import path

from training.evaluation import benchmark_views, experiment_views, proxy_views, round_views
from training.judging import views as judge_views
from training.rl import views as rl_views
from training.runs import views
from training.sampling import views as sampling_views

app_name = "training"
urlpatterns = [
    path("", views.run_list, name="runs"),
    path("new/", views.run_new, name="new"),
    path("rl/new/", rl_views.rl_new, name="rl_new"),
    path("compare/", views.run_compare, name="compare"),
    path("<int:pk>/", views.run_detail, name="run"),
    path("<int:pk>/cancel/", views.run_cancel, name="cancel"),
    path("<int:pk>/resume/", views.run_resume, name="resume"),
    path("<int:pk>/episodes.jsonl", rl_views.rl_episodes_jsonl, name="rl_episodes"),
    path("models/", views.model_list, name="models"),
    path("models/<int:pk>/delete/", views.model_delete, name="delete_model"),
    path("sampling/", sampling_views.sampling_list, name="sampling_runs"),
    path("sampling/new/", sampling_views.sampling_new, name="sampling_new"),
    path("sampling/<int:pk>/", sampling_views.sampling_detail, name="sampling_run"),
    path("sampling/<int:pk>/cancel/", sampling_views.sampling_cancel, name="sampling_cancel"),
    path("judge/batch/<int:pk>/", judge_views.judge_new, name="judge_new"),
    path("judge/<int:pk>/", judge_views.judge_detail, name="judge_run"),
    path("judge/<int:pk>/cancel/", judge_views.judge_cancel, name="judge_cancel"),
    path("proxy/", proxy_views.proxy_list, name="proxy_evaluations"),
    path("proxy/<int:pk>/", proxy_views.proxy_detail, name="proxy_evaluation"),
    path("proxy/<int:pk>/results.csv", proxy_views.proxy_results_csv, name="proxy_results_csv"),
    path("proxy/<int:pk>/cancel/", proxy_views.proxy_cancel, name="proxy_cancel"),
    path("benchmarks/", benchmark_views.benchmark_list, name="benchmarks"),
    path("benchmarks/new/", benchmark_views.benchmark_new, name="benchmark_new"),
    path("benchmarks/<int:pk>/", benchmark_views.benchmark_detail, name="benchmark"),
    path("benchmarks/<int:pk>/cancel/", benchmark_views.benchmark_cancel, name="benchmark_cancel"),
    path("experiments/", experiment_views.experiment_list, name="experiments"),
    path("experiments/demo/", experiment_views.experiment_demo, name="experiment_demo"),
    path("experiments/<int:pk>/", experiment_views.experiment_detail, name="experiment"),
    path("experiments/<int:pk>/report.json", experiment_views.experiment_json, name="experiment_json"),
    path("experiments/<int:pk>/report.csv", experiment_views.experiment_csv, name="experiment_csv"),
    path("experiments/<int:pk>/report.html", experiment_views.experiment_html, name="experiment_html"),
    path("rounds/", round_views.round_list, name="rounds"),
    path("rounds/new/", round_views.round_create, name="round_create"),
    path("rounds/results.csv", round_views.rounds_csv, name="rounds_csv"),
    path("rounds/<int:pk>/", round_views.round_detail, name="round"),
    path("rounds/<int:pk>/runs/", round_views.round_add_runs, name="round_add_runs"),
    path("rounds/<int:pk>/retrain/", round_views.round_retrain, name="round_retrain"),
]
