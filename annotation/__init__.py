"""Questions, demonstrations, feedback tasks, batches, exports: the human-data side of the platform."""
