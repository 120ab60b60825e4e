"""The OpenAI-compatible endpoint backend against a scripted HTTP server on 127.0.0.1, for what a real model
server does not show or do: the exact body and key it receives, each kind of server's grammar fields,
answers without usage, stop strings ignored, 429 and 5xx, timeouts, malformed answers, echoed keys. What a
real server answers (chats, usage, seeds, whole sampling runs) is tested against `transformers serve`
in test_sampling_servers.py."""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import refused_port
from training.sampling.endpoint import EndpointBackend
from training.sampling.endpoints import backend_from, parse_endpoints
from training.sampling.types import BackendError, CompletionRequest, Constraint, Message

KEY = "sk-test-9f8e7d6c5b4a-never-print-me"
KEY_ENV = "WEBGPT_TEST_ENDPOINT_KEY"

# What the server does on one call: (status, body, headers) where body is a dict (sent as JSON) or bytes;
# or a function of the received request returning that triple (to echo, sleep or wait for others).
Reply = tuple[int, Any, dict[str, str]] | Callable[[dict[str, Any]], tuple[int, Any, dict[str, str]]]


def ok(text: str = "Search: capital of France", finish: str = "stop", **extra: Any) -> tuple:
    return 200, {"choices": [{"index": 0, "text": text, "finish_reason": finish}], **extra}, {}


def chat_ok(content: str, finish: str = "stop") -> tuple:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return 200, {"choices": [choice], "usage": {"prompt_tokens": 30, "completion_tokens": 4}}, {}


@dataclass
class Server:
    """A scripted OpenAI-compatible server. ``script[path]`` is consumed one reply per call; the last reply
    repeats. ``received`` holds every request: path, headers, decoded JSON body and arrival time."""

    url: str = ""
    script: dict[str, list[Reply]] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls(self, path: str) -> list[dict[str, Any]]:
        return [r for r in self.received if r["path"] == path]

    def reply_to(self, request: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            self.received.append(request)
            replies = self.script.get(request["path"]) or [(404, {"error": {"message": "no such route"}}, {})]
            reply = replies.pop(0) if len(replies) > 1 else replies[0]
        return reply(request) if callable(reply) else reply


@pytest.fixture
def server() -> Iterator[Server]:
    scripted = Server()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            request = {
                "path": self.path,
                "headers": dict(self.headers),
                "body": json.loads(raw),
                "at": time.monotonic(),
            }
            status, body, headers = scripted.reply_to(request)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout test): nothing to answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False  # a handler still sleeping in a timeout test must not hold up the teardown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    scripted.url = f"http://127.0.0.1:{httpd.server_port}/v1"
    yield scripted
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def backend(scripted: Server, **options: Any) -> EndpointBackend:
    settings = {"api_key_env": KEY_ENV, "backoff_s": 0.01, "max_retries": 3, "timeout_s": 5} | options
    return EndpointBackend(scripted.url, "smollm2-135m", **settings)


def full_error(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def test_a_prompt_goes_to_completions_with_the_model_settings_and_the_key(server: Server, key: str) -> None:
    server.script["/v1/completions"] = [ok(usage={"prompt_tokens": 812, "completion_tokens": 6})]
    request = CompletionRequest(
        prompt="Question: capital of France?\nAction:",
        max_new_tokens=24,
        temperature=0.8,
        seed=7,
        stop=("\n",),
    )
    [completion] = backend(server).complete([request])

    [call] = server.calls("/v1/completions")
    assert call["headers"]["Authorization"] == f"Bearer {KEY}"
    assert call["body"] == {
        "model": "smollm2-135m",
        "prompt": "Question: capital of France?\nAction:",
        "max_tokens": 24,
        "temperature": 0.8,
        "seed": 7,
        "stop": ["\n"],
    }
    assert completion.text == "Search: capital of France"
    assert (completion.tokens, completion.prompt_tokens, completion.finish_reason) == (6, 812, "stop")
    assert completion.details["tries"] == 1 and not completion.details["usage_estimated"]


@pytest.mark.parametrize(
    ("server_kind", "field"),
    [("vllm", "structured_outputs"), ("llamacpp", "grammar"), ("tgi", "response_format")],
)
def test_a_server_with_grammars_gets_the_steps_grammar_and_says_so(
    server: Server, key: str, server_kind: str, field: str
) -> None:
    """What vLLM, llama.cpp and TGI receive (none runs here; the translation itself is tested on real pages
    in test_sampling_grammar.py): the grammar field of their kind, and the completion names the constraint."""
    server.script["/v1/chat/completions"] = [chat_ok("Top")]
    constraint = Constraint(commands=True, forms=("Top", "Back"))
    request = CompletionRequest(messages=(Message("user", "q"),), max_new_tokens=4, constraint=constraint)
    [completion] = backend(server, server=server_kind).complete([request])
    [call] = server.calls("/v1/chat/completions")
    assert set(call["body"]) - {"model", "messages", "max_tokens", "temperature", "seed"} == {field}
    assert json.dumps(call["body"][field]).count("Back") == 1
    assert completion.details["constraint"] in ("commands (regex)", "commands (gbnf)")


def test_stop_strings_are_cut_locally_when_a_server_ignores_them(server: Server, key: str) -> None:
    server.script["/v1/completions"] = [ok("Click [3]\nScroll down\nEnd: answer", finish="length")]
    constrained = CompletionRequest(
        prompt="...", max_new_tokens=16, stop=("End:", "\n"), constraint=Constraint(commands=True)
    )
    [completion] = backend(server).complete([constrained])
    assert (completion.text, completion.finish_reason) == ("Click [3]", "stop")


def test_without_usage_tokens_are_estimated_and_flagged(server: Server, key: str) -> None:
    server.script["/v1/completions"] = [ok("x" * 10)]  # no usage at all (some llama.cpp builds)
    [completion] = backend(server).complete([CompletionRequest(prompt="y" * 40, max_new_tokens=8)])
    assert (completion.tokens, completion.prompt_tokens) == (3, 10)  # ceil(chars / 4)
    assert completion.details["usage_estimated"]


def test_a_batch_is_sent_in_parallel_and_comes_back_in_order(server: Server, key: str) -> None:
    n = 6
    all_in_flight = threading.Barrier(n, timeout=10)

    def echo_after_the_others_arrive(request: dict[str, Any]) -> tuple:
        index = int(request["body"]["prompt"])
        all_in_flight.wait()  # raises (the request then fails) unless all n requests are open at once
        time.sleep(0.03 * (n - index))  # the last request is answered first
        return ok(f"answer {index}")

    server.script["/v1/completions"] = [echo_after_the_others_arrive]
    requests = [CompletionRequest(prompt=str(i), max_new_tokens=4, seed=i) for i in range(n)]
    completions = backend(server, max_parallel=n).complete(requests)
    assert [c.text for c in completions] == [f"answer {i}" for i in range(n)]
    assert sorted(call["body"]["seed"] for call in server.received) == list(range(n))


def test_429_waits_as_long_as_retry_after_says_then_succeeds(server: Server, key: str) -> None:
    too_many = (429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
    server.script["/v1/completions"] = [too_many, ok("Search: tides")]
    [completion] = backend(server, backoff_s=0.001).complete(
        [CompletionRequest(prompt="q", max_new_tokens=4)]
    )

    first, second = server.calls("/v1/completions")
    assert completion.text == "Search: tides" and completion.details["tries"] == 2
    # The backoff alone would wait about a millisecond: a second between the tries is the Retry-After.
    assert second["at"] - first["at"] >= 0.95


def test_503_twice_then_success(server: Server, key: str) -> None:
    unavailable = (503, b"<html>Service Unavailable</html>", {"Content-Type": "text/html"})
    server.script["/v1/chat/completions"] = [unavailable, unavailable, chat_ok("End: done")]
    request = CompletionRequest(messages=(Message("user", "hi"),), max_new_tokens=4)
    [completion] = backend(server).complete([request])
    assert completion.text == "End: done" and completion.details["tries"] == 3
    assert len(server.calls("/v1/chat/completions")) == 3


def test_a_400_is_not_retried_and_says_what_the_server_said(server: Server, key: str) -> None:
    refusal = {"error": {"message": "max_tokens must be at most 2048, got 99999", "type": "invalid_request"}}
    server.script["/v1/completions"] = [(400, refusal, {})]
    with pytest.raises(BackendError) as caught:
        backend(server).complete([CompletionRequest(prompt="q", max_new_tokens=99999)])
    assert len(server.calls("/v1/completions")) == 1
    message = str(caught.value)
    assert "HTTP 400" in message and "max_tokens must be at most 2048, got 99999" in message
    assert server.url in message and "smollm2-135m" in message


def test_5xx_until_the_retries_run_out_is_a_clear_error(server: Server, key: str) -> None:
    server.script["/v1/completions"] = [(502, {"error": "upstream model crashed"}, {})]
    with pytest.raises(BackendError) as caught:
        backend(server, max_retries=2).complete([CompletionRequest(prompt="q", max_new_tokens=4)])
    assert len(server.calls("/v1/completions")) == 3
    message = str(caught.value)
    assert "3 tries" in message and "HTTP 502: upstream model crashed" in message
    assert server.url in message and "'smollm2-135m'" in message and KEY_ENV in message


def test_a_server_slower_than_the_timeout_is_retried_then_a_clear_error(server: Server, key: str) -> None:
    def too_slow(request: dict[str, Any]) -> tuple:
        time.sleep(1.5)
        return ok()

    server.script["/v1/completions"] = [too_slow]
    with pytest.raises(BackendError) as caught:
        backend(server, timeout_s=0.3, max_retries=1).complete(
            [CompletionRequest(prompt="q", max_new_tokens=4)]
        )
    assert len(server.calls("/v1/completions")) == 2
    message = str(caught.value)
    assert "2 tries" in message and "no answer within the timeout (0.3 s)" in message
    assert server.url in message and KEY_ENV in message


def test_a_server_that_is_not_there_is_a_clear_error(key: str) -> None:
    with refused_port() as port:  # bound here, never listening: nothing can answer on it
        down = EndpointBackend(
            f"http://127.0.0.1:{port}/v1", "m", api_key_env=KEY_ENV, max_retries=1, backoff_s=0.01
        )
        with pytest.raises(BackendError, match=r"failed after 2 tries \(last: could not connect"):
            down.complete([CompletionRequest(prompt="q", max_new_tokens=4)])


@pytest.mark.parametrize(
    ("path", "reply", "what"),
    [
        ("/v1/completions", (200, b"<html>Welcome to nginx!</html>", {}), "not JSON"),
        ("/v1/completions", (200, {"id": "cmpl-1", "object": "text_completion"}, {}), "no choices"),
        ("/v1/completions", (200, {"choices": []}, {}), "no choices"),
        ("/v1/completions", (200, [1, 2], {}), "not a JSON object"),
        ("/v1/completions", (200, {"choices": [{"text": 42}]}, {}), "text is not a string"),
        ("/v1/completions", (200, {"choices": [{"text": "a", "finish_reason": 1}]}, {}), "finish_reason"),
        ("/v1/chat/completions", (200, {"choices": [{"text": "a"}]}, {}), "no message"),
    ],
)
def test_a_malformed_answer_is_a_clear_error_and_not_retried(
    server: Server, key: str, path: str, reply: tuple, what: str
) -> None:
    server.script[path] = [reply]
    chat = path.endswith("chat/completions")
    request = (
        CompletionRequest(messages=(Message("user", "q"),), max_new_tokens=4)
        if chat
        else CompletionRequest(prompt="q", max_new_tokens=4)
    )
    with pytest.raises(BackendError, match=what) as caught:
        backend(server).complete([request])
    assert len(server.calls(path)) == 1 and server.url in str(caught.value)


def test_the_key_never_appears_in_errors_or_logs(
    server: Server, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    echoes_the_key = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    cases = {
        "/v1/completions": [(401, echoes_the_key, {})],
        "/v1/chat/completions": [(503, {"error": f"overloaded for {KEY}"}, {})],
    }
    server.script.update(cases)
    errors = []
    with caplog.at_level(logging.DEBUG):
        for request in (
            CompletionRequest(prompt="q", max_new_tokens=4),
            CompletionRequest(messages=(Message("user", "q"),), max_new_tokens=4),
        ):
            with pytest.raises(BackendError) as caught:
                backend(server, max_retries=1).complete([request])
            errors.append(caught.value)
    server.script["/v1/completions"] = [(200, {"choices": [{"text": 1}], "echo": KEY}, {})]
    with pytest.raises(BackendError) as caught:
        backend(server).complete([CompletionRequest(prompt="q", max_new_tokens=4)])
    errors.append(caught.value)

    assert "Incorrect API key provided: ***" in str(errors[0]) and KEY_ENV in str(errors[0])
    assert "overloaded for ***" in str(errors[1])
    for error in errors:
        assert KEY not in full_error(error) and KEY not in repr(error)
    assert caplog.records and KEY not in caplog.text  # the retries were logged, without the key


def test_a_missing_key_variable_is_named(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(BackendError, match=f"the API key variable {KEY_ENV} is not set"):
        backend(server).complete([CompletionRequest(prompt="q", max_new_tokens=4)])
    assert server.received == []


def test_without_a_key_variable_no_authorization_is_sent(server: Server) -> None:
    server.script["/v1/completions"] = [ok("End: fine")]
    [completion] = backend(server, api_key_env=None).complete(
        [CompletionRequest(prompt="q", max_new_tokens=4)]
    )
    assert completion.text == "End: fine" and "Authorization" not in server.received[0]["headers"]


@pytest.mark.parametrize(
    "base_url",
    [
        "ftp://models.example/v1",
        "file:///etc/passwd",
        "127.0.0.1:8000/v1",
        "http://user:pw@host/v1",
        "http:///v1",
    ],
)
def test_only_plain_http_and_https_base_urls(base_url: str) -> None:
    with pytest.raises(ValueError, match="base URL"):
        EndpointBackend(base_url, "m")


def test_a_key_passed_as_the_variable_name_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as caught:
        EndpointBackend("https://api.example.com/v1", "m", api_key_env=KEY)
    assert KEY not in str(caught.value)


def test_an_endpoint_names_its_kind_of_server_or_is_refused() -> None:
    text = '{"serve": {"base_url": "http://127.0.0.1:8000/v1", "model": "m", "server": "%s"}}'
    assert parse_endpoints(text % "llamacpp")["serve"].server == "llamacpp"
    assert backend_from(parse_endpoints(text % "transformers")["serve"]).server == "transformers"
    assert parse_endpoints(text.replace(', "server": "%s"', ""))["serve"].server == "openai"
    with pytest.raises(
        ValueError, match="serve: server must be one of openai, vllm, llamacpp, tgi, transformers"
    ):
        parse_endpoints(text % "ollama")
