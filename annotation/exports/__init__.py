"""Dataset exports: immutable files written by a Celery job from one consistent database snapshot."""
