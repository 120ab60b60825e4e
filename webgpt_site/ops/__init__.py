"""What operators and their machines call: health probes, Prometheus metrics, request ids in the logs.

- ``health``: ``/healthz`` (the process answers) and ``/readyz`` (database, broker and storage reachable).
- ``metrics``: ``/metrics`` for Prometheus (django-prometheus' request metrics plus our own families).
- ``broker``: short-lived broker connections for the two above, with timeouts.
- ``logs`` and ``middleware``: a request id per request (and the task id in workers) on every log record,
  JSON or text lines, one access line per request.
"""
