"""Jobs of the ``training`` and ``sampling`` queues (run each queue's worker with concurrency 1: a job
uses every core it is given). Each task is named by its job model, which producers send it by
(core.jobs.queueing)."""

from celery import shared_task

from annotation.models.judging import JudgeRun
from training.evaluation.benchmark_jobs import run_benchmark_job
from training.evaluation.proxy_jobs import run_proxy_evaluation_job
from training.judging.jobs import run_judge_job
from training.models import BenchmarkRun, ProxyEvaluation, SamplingRun, TrainingRun
from training.runs.jobs import run_training_job
from training.sampling.jobs import run_sampling_job


@shared_task(name=TrainingRun.task_name, ignore_result=True, acks_late=True)
def run_training(*, run_id: int) -> None:
    run_training_job(run_id)


@shared_task(name=SamplingRun.task_name, ignore_result=True, acks_late=True)
def run_sampling(*, run_id: int) -> None:
    run_sampling_job(run_id)


@shared_task(name=ProxyEvaluation.task_name, ignore_result=True, acks_late=True)
def run_proxy_evaluation(*, evaluation_id: int) -> None:
    run_proxy_evaluation_job(evaluation_id)


@shared_task(name=JudgeRun.task_name, ignore_result=True, acks_late=True)
def run_judge(*, judge_run_id: int) -> None:
    run_judge_job(judge_run_id)


@shared_task(name=BenchmarkRun.task_name, ignore_result=True, acks_late=True)
def run_benchmark(*, benchmark_id: int) -> None:
    run_benchmark_job(benchmark_id)
