"""The embedded broker (``make run``: no ``CELERY_BROKER_URL``): kombu's filesystem transport, with message
files named so that they sort in the order they were sent.

kombu names a message ``<monotonic milliseconds>_<uuid>.<queue>.msg`` and a worker takes the first name in
string order. The milliseconds are not zero-padded and restart at every boot, so the order breaks whenever
the counter gains a digit (16.7 minutes, 2.8 hours and 28 hours after boot) and after every reboot: a job
queued before it waits behind every job queued after it (seen on the queues page: a training run queued
first, run last). Here the name starts with the wall clock in nanoseconds, zero-padded to 20 digits: the
same width until the year 2286, and it does not restart with the machine. (A clock set back by NTP can swap
two messages sent within that step; nothing is lost either way.)
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


def message_name(queue: str, now_ns: int | None = None) -> str:
    """A message file's name: sent-time first, fixed width, so string order is the order sent."""
    sent = time.time_ns() if now_ns is None else now_ns
    return f"{sent:020d}_{uuid.uuid4()}.{queue}.msg"


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        """kombu's own ``_put`` (an exclusively locked write), with our file name."""
        path = os.path.join(self.data_folder_out, message_name(queue))
        file = None
        try:
            file = open(path, "wb", buffering=0)  # noqa: SIM115 (locked, then closed in finally, as kombu does)
            filesystem.lock(file, filesystem.LOCK_EX)
            file.write(str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {path!r} to directory") from exc
        finally:
            if file is not None:
                filesystem.unlock(file)
                file.close()


class Transport(filesystem.Transport):
    Channel = Channel

    @property
    def default_connection_params(self) -> dict[str, Any]:
        """No host: kombu's virtual transports default to "localhost", so a connection to a folder warned
        "No hostname was supplied" each time it described itself (every worker's start, every probe)."""
        return {"port": self.default_port}
