"""Behaviour cloning, reward models, sampling and evaluation, run as Celery jobs on the training queue."""
