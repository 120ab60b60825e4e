"""Short broker connections for the probes and the metrics: connect, ping, count the queues, close.

Both run on web processes, on the load balancer's and Prometheus' schedule, so a broker that is down must
cost a bounded wait (``TIMEOUT_S``, no retries), never the library's default of retrying forever. The
connection is built from the settings at each call (the Celery app reads them once at start-up), with the
same transport options as the workers, so a ``CELERY_BROKER_KEY_PREFIX`` is honoured: kombu prefixes every
key it touches, and the embedded broker's folders come from the options too.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from kombu import Connection
from kombu.transport.virtual import Channel

# Seconds to wait for the broker to accept a connection or answer a command.
TIMEOUT_S = 2.0


def is_embedded() -> bool:
    return settings.CELERY_BROKER_URL == "filesystem://"


@contextmanager
def channel() -> Iterator[Channel]:
    """A channel on a fresh connection to the configured broker; raises if it cannot be had in time."""
    options = dict(getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {})
    options["max_retries"] = 0  # fail at the first refusal: the caller reports it, the next call tries again
    if not is_embedded():
        options |= {"socket_connect_timeout": TIMEOUT_S, "socket_timeout": TIMEOUT_S}
    transport = getattr(settings, "CELERY_BROKER_TRANSPORT", None)  # the embedded broker's
    with Connection(
        settings.CELERY_BROKER_URL, transport=transport, connect_timeout=TIMEOUT_S, transport_options=options
    ) as conn:
        # For Redis, opening the channel sends a PING: an unreachable or refusing server raises here.
        yield conn.default_channel


def check() -> None:
    """Raise unless the broker takes messages: Redis answers (through kombu, with the prefix and
    timeouts of ``channel``); for the embedded broker, its folder exists and a file can be written there."""
    if is_embedded():
        folder = Path(settings.CELERY_BROKER_FOLDER)
        if not folder.is_dir():
            raise FileNotFoundError("the embedded broker's folder does not exist")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".readyz-"):
            pass
        return
    with channel():
        pass


def queue_lengths(queues: Iterable[str] | None = None) -> dict[str, int]:
    """Messages waiting in each of ``queues`` (default: ``CELERY_QUEUES``; Redis: the lengths of the queue's
    lists, every priority level summed; the embedded broker: its message files). An empty or unused queue
    counts 0."""
    with channel() as chan:
        # Not a passive declare: with a key prefix, kombu's existence check forgets the prefix and says
        # "not found". Declaring changes nothing on the broker (the workers declare the same queues).
        names = settings.CELERY_QUEUES if queues is None else queues
        return {queue: chan.queue_declare(queue=queue).message_count for queue in names}
