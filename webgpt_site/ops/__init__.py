"""What operators and their machines call: health probes and Prometheus metrics.

- ``health``: ``/healthz`` (the process answers) and ``/readyz`` (database, broker and storage reachable).
- ``metrics``: ``/metrics`` for Prometheus (django-prometheus' request metrics plus our own families).

The broker connections they use and the request ids in the logs are core's (``core/ops``).
"""
