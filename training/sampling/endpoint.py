"""An OpenAI-compatible HTTP backend: vLLM (``vllm serve``), TGI, llama.cpp's server and hosted APIs.

This is how a team samples at scale: servers on as many GPUs as they have, our workers as clients. A request
with ``prompt`` goes to ``POST {base_url}/completions``, one with ``messages`` to
``POST {base_url}/chat/completions`` (``base_url`` usually ends in ``/v1``). A batch is sent as parallel
requests (at most ``max_parallel`` in flight) and the results come back in the order of the requests.

Security, for the lead: ``base_url`` is configured by an operator. The Django side must choose among endpoints
named in settings and never pass a URL taken from a web request (that would let a user make our workers send
requests, with the API key, anywhere). The key is read from the environment variable ``api_key_env`` at each
call, sent as ``Authorization: Bearer``, and never stored, logged or put in an error message (a server that
echoes it back has it masked).

Failures: connection errors, timeouts, 429 and 5xx are retried with exponential backoff and jitter (a
``Retry-After`` in seconds, or as an HTTP date, is honoured up to ``MAX_WAIT_S``); other 4xx fail at once with
the status and the server's message. A malformed answer (not JSON, no choices, wrong types) fails at once.
Every failure is a ``BackendError`` that says what to check.

``CompletionRequest.constraint`` is sent as the server's own grammar field where its kind (``server``:
vLLM, llama.cpp, TGI) has one (``dialects.py``, ``grammar.py``): commands within the grammar of the current
page, quotes among its sentences. Elsewhere (hosted APIs, ``transformers serve``) the environment judges what
comes back (an invalid command or a non-verbatim quote is an invalid action, counted and explained to the
policy). Each completion says which constraint its request carried (``details["constraint"]``). Only the
standard library is used.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import math
import os
import random
import re
import ssl
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from training.sampling.dialects import SERVERS, request_fields
from training.sampling.types import BackendError, Completion, CompletionRequest, Message, TokenCounter

logger = logging.getLogger(__name__)

MAX_WAIT_S = 60.0  # the longest pause between tries, whatever Retry-After or the backoff says
MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # a completion is a few KB; more is a broken or hostile server
MAX_SERVER_MESSAGE = 300  # characters of the server's error message quoted in a BackendError
CHARS_PER_TOKEN = 4  # the token estimate when a server reports no usage (about right for English BPE)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Retryable(Exception):
    """A try failed in a way another try may fix (connection, timeout, 429, 5xx)."""

    def __init__(self, what: str, retry_after_s: float | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.retry_after_s = retry_after_s


class EndpointBackend:
    """Completions from an OpenAI-compatible server. ``timeout_s``: the longest wait for the server to answer
    (each read); ``connect_timeout_s``: to open the connection. ``max_retries``: tries after the first, so a
    request is sent at most ``max_retries + 1`` times; the n-th retry waits about ``backoff_s * 2**(n-1)``
    (jittered, at most ``MAX_WAIT_S``). ``server``: the kind of server (``dialects.SERVERS``), for the fields
    only some servers take (grammars; ``transformers serve``'s sampling switch)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        timeout_s: float = 60,
        connect_timeout_s: float = 10,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_parallel: int = 8,
        server: str = "openai",
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(
                f"the endpoint base URL must be http:// or https:// with a host, got {base_url!r}"
            )
        if url.username or url.password or url.query or url.fragment:
            # Credentials belong in the key variable; a query or fragment would be lost when paths are added.
            raise ValueError("the endpoint base URL must have no user:password@, query or fragment")
        if not model:
            raise ValueError("the endpoint needs a model name (as the server lists it at /v1/models)")
        if api_key_env is not None and not _ENV_NAME.fullmatch(api_key_env):
            # Most likely the key itself was passed instead of the variable's name: do not echo it.
            raise ValueError(
                "api_key_env is the NAME of an environment variable holding the key, not the key"
            )
        if server not in SERVERS:
            raise ValueError(f"server must be one of {', '.join(SERVERS)}, got {server!r}")
        if timeout_s <= 0 or connect_timeout_s <= 0 or backoff_s < 0 or max_retries < 0 or max_parallel < 1:
            raise ValueError("timeouts must be positive, backoff and retries not negative, max_parallel >= 1")
        self.base_url = base_url.rstrip("/")
        self._scheme, self._host, self._port = url.scheme, url.hostname, url.port
        self._path = url.path.rstrip("/")
        self.model, self.server = model, server
        self.api_key_env = api_key_env
        self.timeout_s, self.connect_timeout_s = float(timeout_s), float(connect_timeout_s)
        self.max_retries, self.backoff_s, self.max_parallel = max_retries, float(backoff_s), max_parallel
        self.name = f"endpoint:{model}"
        self._random = random.Random()  # noqa: S311 (jitter only; nothing about the samples depends on it)
        self._tls = ssl.create_default_context() if url.scheme == "https" else None

    # --- the Backend protocol ---

    def complete(
        self, requests: Sequence[CompletionRequest], on_tokens: TokenCounter | None = None
    ) -> list[Completion]:
        """One completion per request, in order. Raises ``BackendError`` as soon as one request fails for
        good (requests not yet started are cancelled). ``on_tokens`` hears each completion's tokens as it
        is collected, in this thread (a job writes its row there, on its own database connection)."""
        if not requests:
            return []
        key = self._api_key()
        count = on_tokens or (lambda tokens: None)
        if len(requests) == 1:
            completion = self._complete_one(requests[0], key)
            count(completion.tokens)
            return [completion]
        pool = ThreadPoolExecutor(max_workers=min(self.max_parallel, len(requests)))
        futures = [pool.submit(self._complete_one, request, key) for request in requests]
        try:
            completions = []
            for future in futures:
                completions.append(future.result())
                count(completions[-1].tokens)
            return completions
        finally:
            # On success everything is done; on a failure, report it now rather than after the requests
            # still in flight have used up their retries (they finish in the background, results dropped).
            pool.shutdown(wait=False, cancel_futures=True)

    # --- one request ---

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise BackendError(
                f"the API key variable {self.api_key_env} is not set (or empty) in this worker"
            )
        return key

    def _complete_one(self, request: CompletionRequest, key: str | None) -> Completion:
        route, body, constraint = request_body(self.model, self.server, request)
        answer, tries = self._post_with_retries(route, body, key)
        completion = _completion(
            answer, request.messages is not None, request, tries, self._where(route), key
        )
        completion.details["constraint"] = constraint
        return completion

    def _post_with_retries(self, route: str, body: dict[str, Any], key: str | None) -> tuple[Any, int]:
        """The decoded JSON answer and how many tries it took."""
        payload = json.dumps(body).encode()
        for attempt in range(self.max_retries + 1):
            try:
                return self._post(route, payload, key), attempt + 1
            except _Retryable as failure:
                if attempt == self.max_retries:
                    raise BackendError(
                        f"{self._where(route)} failed after {attempt + 1} tries (last: {failure.what}). "
                        f"Check that the server is up at {self.base_url}, serves the model {self.model!r}"
                        + (f", and accepts the key in {self.api_key_env}" if self.api_key_env else "")
                    ) from None
                backoff = self.backoff_s * 2**attempt * self._random.uniform(0.5, 1.0)
                wait = min(MAX_WAIT_S, max(backoff, failure.retry_after_s or 0.0))
                logger.warning("%s: %s; retrying in %.2f s", self._where(route), failure.what, wait)
                time.sleep(wait)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _post(self, route: str, payload: bytes, key: str | None) -> Any:
        connection: http.client.HTTPConnection
        if self._tls is not None:
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.connect_timeout_s, context=self._tls
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self.connect_timeout_s)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            connection.connect()
            if connection.sock is not None:  # always, after connect(); from here on, the model's time
                connection.sock.settimeout(self.timeout_s)
            connection.request("POST", self._path + route, body=payload, headers=headers)
            response = connection.getresponse()
            raw = response.read(MAX_RESPONSE_BYTES + 1)
        except TimeoutError:  # socket.timeout is TimeoutError since 3.10
            raise _Retryable(f"no answer within the timeout ({self.timeout_s:g} s)") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Retryable(f"could not connect or the connection broke ({type(exc).__name__})") from None
        finally:
            connection.close()
        status = response.status
        if status == 429 or status >= 500:
            what = f"HTTP {status}: {_server_message(raw, key)}"
            raise _Retryable(what, _retry_after_s(response.getheader("Retry-After")))
        if 300 <= status < 400:
            raise BackendError(
                f"{self._where(route)} redirected (HTTP {status}) to {response.getheader('Location')!r}: "
                "set the base URL to where the API really is"
            )
        if status >= 400:
            hint = {
                401: f" (check the key in {self.api_key_env})"
                if self.api_key_env
                else " (the server wants a key)",
                403: f" (check the key in {self.api_key_env} and its rights)",
                404: f" (check the base URL {self.base_url}, usually ending in /v1, and the model name)",
            }.get(status, "")
            raise BackendError(
                f"{self._where(route)} refused the request: HTTP {status}: {_server_message(raw, key)}{hint}"
            )
        if len(raw) > MAX_RESPONSE_BYTES:
            raise BackendError(f"{self._where(route)} answered with more than {MAX_RESPONSE_BYTES} bytes")
        try:
            return json.loads(raw)
        except ValueError:
            raise BackendError(
                f"{self._where(route)} answered HTTP {status} with a body that is not JSON: "
                f"{_truncate(raw.decode('utf-8', 'replace'), key)!r} "
                f"(is {self.base_url} an OpenAI-compatible API?)"
            ) from None

    def _where(self, route: str) -> str:
        return f"endpoint {self.base_url}{route} (model {self.model!r})"


# --- reading the answer ---


def request_body(model: str, server: str, request: CompletionRequest) -> tuple[str, dict[str, Any], str]:
    """(route, JSON body, the constraint it carries) of ``request`` to a server of kind ``server``: the
    standard fields, and the server's own for grammars and schemas (``dialects.request_fields``)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_new_tokens,
        "temperature": request.temperature,
        "seed": request.seed,
    }
    chat = request.messages is not None
    if chat:
        body["messages"] = [{"role": m.role, "content": m.content} for m in request.messages or ()]
    else:
        body["prompt"] = request.prompt
    if request.stop:
        body["stop"] = list(request.stop)
    fields, constraint = request_fields(server, request)
    return ("/chat/completions" if chat else "/completions"), body | fields, constraint


def _completion(
    answer: Any, chat: bool, request: CompletionRequest, tries: int, where: str, key: str | None
) -> Completion:
    """Check the answer's shape (a malformed answer is a BackendError, never a KeyError) and build the
    Completion. Tokens come from ``usage`` when the server reports it, else ``len(text) / CHARS_PER_TOKEN``
    rounded up (``details["usage_estimated"]`` says which)."""

    def malformed(what: str) -> BackendError:
        return BackendError(
            f"{where} sent a malformed answer: {what}: {_truncate(json.dumps(answer), key)!r}"
        )

    if not isinstance(answer, dict):
        raise malformed("not a JSON object")
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed("no choices")
    choice = choices[0]
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise malformed("the choice has no message")
        text = message.get("content")
        text = "" if text is None else text  # a chat answer with no content (e.g. a refusal) is empty text
    else:
        text = choice.get("text")
    if not isinstance(text, str):
        raise malformed("the completion text is not a string")
    raw_reason = choice.get("finish_reason")
    if raw_reason is not None and not isinstance(raw_reason, str):
        raise malformed("finish_reason is not a string")

    # "length" (OpenAI, vLLM, llama.cpp, TGI); anything else (stop, eos_token, stop_sequence...) ended it.
    finish: Literal["stop", "length"] = "length" if raw_reason in ("length", "max_tokens") else "stop"
    cut = _cut_at_stop(text, request.stop)  # in case the server ignored `stop` or included the stop string
    if cut is not None:
        text, finish = cut, "stop"

    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens, tokens_known = _count(usage.get("completion_tokens"), text)
    prompt_text = request.prompt if request.prompt is not None else _chat_text(request.messages or ())
    prompt_tokens, prompt_known = _count(usage.get("prompt_tokens"), prompt_text)
    details = {
        "tries": tries,
        "finish_reason": raw_reason,
        "usage_estimated": not (tokens_known and prompt_known),
    }
    return Completion(
        text=text, tokens=tokens, finish_reason=finish, prompt_tokens=prompt_tokens, details=details
    )


def _cut_at_stop(text: str, stop: Sequence[str]) -> str | None:
    """``text`` up to the earliest stop string, or None when there is none in it."""
    found = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(found)] if found else None


def _count(reported: Any, text: str) -> tuple[int, bool]:
    if isinstance(reported, int) and not isinstance(reported, bool) and reported >= 0:
        return reported, True
    return math.ceil(len(text) / CHARS_PER_TOKEN), False


def _chat_text(messages: Sequence[Message]) -> str:
    return "\n".join(m.content for m in messages)


def _server_message(raw: bytes, key: str | None) -> str:
    """The server's own error message: ``{"error": {"message": ...}}`` (OpenAI, vLLM, llama.cpp),
    ``{"error": "..."}`` (TGI), ``{"message"|"detail": ...}``, else the body's text; truncated, key masked."""
    text = raw.decode("utf-8", "replace")  # whole, so the key is masked before truncation
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            text = str(error["message"])
        elif isinstance(error, str) and error:
            text = error
        elif body.get("message") or body.get("detail"):
            text = str(body.get("message") or body.get("detail"))
    return _truncate(text.strip() or "(empty body)", key)


def _truncate(text: str, key: str | None) -> str:
    if key:
        text = text.replace(key, "***")  # some servers echo the key they refused
    return text if len(text) <= MAX_SERVER_MESSAGE else text[:MAX_SERVER_MESSAGE] + "..."


def _retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` as seconds (``"2"``) or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time()) if when.tzinfo else None
