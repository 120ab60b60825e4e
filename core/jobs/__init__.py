"""The one lifecycle every kind of background job shares (exports, corpus imports, training, sampling and
proxy-evaluation runs, and whatever comes next), on the bottom floor: it imports no app.

- ``models.JobRow``: the row's state (owner, status, cancel flag, log, error, times, heartbeat) and the
  bookkeeping every job does on it (claim, cancel, finish, fail) by primary-key updates. A job model
  inherits it and declares its task's name, queue and keyword, and what a dead worker leaves to discard.
- ``queueing.enqueue(row)``: the task sent by name once the row is committed (producers never import a
  task, so nothing imports upwards or round in a circle to queue a job).
- ``runner.run_job(model, pk, execute)``: claim, redelivery, heartbeat, cancel and failure around the
  kind's own ``execute(row)``.
- ``sweeper``: fails rows whose worker died and resends lost messages, for every job model it finds in the
  app registry.

A new kind of job is one model inheriting JobRow plus one execute function and its task in its app's
``tasks.py``; it touches nothing here (docs/architecture.md, "Where a new job kind goes").
"""
