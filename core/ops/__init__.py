"""What every process shares for operations: short-lived broker connections with timeouts (``broker``), and
a request id per request (and the task id in workers) on every log record, JSON or text lines, one access
line per request (``logs``, ``middleware``)."""
