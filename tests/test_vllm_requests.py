"""The platform's requests to vLLM (``server: vllm``, training/sampling/dialects.py) against vLLM's own
request models, on machines without a GPU: the suite cannot start vLLM (CUDA only), so the bodies the
endpoint backend sends are checked against

- the JSON Schema of vLLM's ``ChatCompletionRequest`` and ``CompletionRequest`` (tests/vllm/, written from
  vLLM 0.33.0 by scripts/vllm_request_schemas.py; what its server publishes in ``/openapi.json``), closed:
  vLLM accepts and silently ignores fields it does not know (its models allow extras), which is how a
  renamed constraint field (``guided_regex``, removed in 0.12) leaves decoding unconstrained without an
  error, so here an unknown field at any depth fails;
- vLLM's rule that structured outputs name exactly one constraint;
- and, where ``vllm`` imports (a GPU machine, the device check: scripts/device/check-vllm.sh), vLLM's own
  models themselves: the body validates and the request's sampling parameters carry the constraint.

A real vLLM server takes the same bodies in bench/check_server.py (``--server vllm``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from browser.engine.browser import Browser
from tests.test_sampling_grammar import QUESTION, index, on_a_page  # noqa: F401 (fixtures)
from training.judging.prompts import shown_item as judged_item
from training.judging.prompts import verdict_schema
from training.sampling.endpoint import request_body
from training.sampling.episode import SamplingSettings
from training.sampling.policies import PromptedPolicy, constraint_for
from training.sampling.types import CompletionRequest, JsonSchema, Message

SCHEMAS = Path(__file__).resolve().parent / "vllm"
# vLLM's StructuredOutputsParams: exactly one of these may be set (its __post_init__).
ONE_CONSTRAINT = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every object that lists its properties closed to others (free-form objects, like a
    JSON schema's own ``schema`` field, have no properties and stay open)."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict) and node["properties"]:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


VALIDATORS = {
    route: jsonschema.Draft202012Validator(closed(json.loads((SCHEMAS / f"{name}.schema.json").read_text())))
    for route, name in (("/chat/completions", "chat_completions"), ("/completions", "completions"))
}


class Kept:
    """A backend that answers nothing and keeps the requests a policy makes."""

    name = "kept"

    def __init__(self) -> None:
        self.requests: list[CompletionRequest] = []


def vllm_requests(browser: Browser) -> dict[str, CompletionRequest]:
    """What the platform asks vLLM for: a browsing step of the prompted policy (its chat, the guided command
    grammar of the page with its quotes), the same step as a raw prompt (a BC policy), and a judge's verdict
    (a chat with the verdict schema) and a claim check's schema on a raw prompt."""
    settings = SamplingSettings(seed=4)
    policy = PromptedPolicy(Kept())  # type: ignore[arg-type]
    step = policy.command_request(browser, settings, seed=11)
    constraint = constraint_for(browser, settings, default=True)
    raw = CompletionRequest(prompt=browser.observation(), max_new_tokens=48, seed=12, stop=("\n",),
                            constraint=constraint)  # fmt: skip
    item = judged_item("webgpt_comparison", "", QUESTION, [("Geelong [1].", [{"title": "t", "extract": "e"}]),
                                                           ("Sydney.", [])])  # fmt: skip
    verdict = JsonSchema("verdict", verdict_schema(item))
    judge = CompletionRequest(
        messages=(Message("system", "judge"), Message("user", "compare")),
        max_new_tokens=400,
        temperature=0.7,
        seed=13,
        json_schema=verdict,
    )
    claim = CompletionRequest(prompt="Claim: x\nSupport:", max_new_tokens=64, seed=14, json_schema=verdict)
    return {"browsing chat": step, "browsing prompt": raw, "judge chat": judge, "claim prompt": claim}


@pytest.fixture
def bodies(on_a_page) -> dict[str, tuple[str, dict[str, Any], str]]:  # noqa: F811 (the fixture, imported)
    return {
        name: request_body("smollm2", "vllm", request) for name, request in vllm_requests(on_a_page).items()
    }


def test_every_request_to_vllm_is_valid_by_its_schema_and_sends_no_field_it_would_ignore(bodies):
    assert set(bodies) == {"browsing chat", "browsing prompt", "judge chat", "claim prompt"}
    for name, (route, body, constraint) in bodies.items():
        errors = [
            f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in VALIDATORS[route].iter_errors(body)
        ]
        assert not errors, (name, errors)
        assert constraint != "none", name
        structured = body.get("structured_outputs")
        if structured is not None:  # the command grammar, as a regex
            assert [key for key in ONE_CONSTRAINT if structured.get(key) is not None] == ["regex"], name
            assert "Quote: " in structured["regex"] and body["seed"] in (11, 12)
        else:  # a JSON schema, as OpenAI's structured-outputs form (vLLM reads it into the same params)
            form = body["response_format"]
            assert form["type"] == "json_schema" and form["json_schema"]["schema"]["type"] == "object", name


def test_an_unknown_or_misplaced_field_fails_the_check_as_vllm_would_ignore_it(bodies):
    """The check can fail: the fields vLLM dropped or never had, at the top and inside structured outputs."""
    route, body, _ = bodies["browsing chat"]
    regex = body["structured_outputs"]["regex"]
    renamed = {k: v for k, v in body.items() if k != "structured_outputs"} | {"guided_regex": regex}
    inside = body | {"structured_outputs": {"pattern": regex}}
    two = body | {"structured_outputs": {"regex": regex, "grammar": 'root ::= "x"'}}
    wrong_type = body | {"max_tokens": "48"}
    validator = VALIDATORS[route]
    assert not validator.is_valid(renamed) and not validator.is_valid(inside)
    assert not validator.is_valid(wrong_type)
    assert validator.is_valid(two)  # valid by the schema, refused by the one-constraint rule (checked above)
    assert len([key for key in ONE_CONSTRAINT if two["structured_outputs"].get(key)]) == 2


def test_vllms_own_request_models_take_our_bodies_and_apply_their_constraints(bodies):
    """Runs where vLLM imports (its request models need no GPU); skipped elsewhere, as in the suite's CI."""
    chat = pytest.importorskip("vllm.entrypoints.openai.chat_completion.protocol")
    plain = pytest.importorskip("vllm.entrypoints.openai.completion.protocol")
    models = {"/chat/completions": chat.ChatCompletionRequest, "/completions": plain.CompletionRequest}
    for name, (route, body, _) in bodies.items():
        model = models[route]
        request = model.model_validate(body)
        assert set(body) <= set(model.model_fields), name
        params = request.to_sampling_params(max_tokens=body["max_tokens"], default_sampling_params={})
        assert params.seed == body["seed"] and params.temperature == body["temperature"], name
        wanted = params.structured_outputs
        assert wanted is not None, name
        if "structured_outputs" in body:
            assert wanted.regex == body["structured_outputs"]["regex"], name
        else:
            assert wanted.json == body["response_format"]["json_schema"]["schema"], name


def test_the_schemas_are_vllms_and_say_which_version():
    for name in ("chat_completions", "completions"):
        schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert schema["$comment"].startswith("vLLM 0.33.0 (Apache-2.0)")
        assert {"structured_outputs", "response_format", "seed", "max_tokens"} <= set(schema["properties"])
        jsonschema.Draft202012Validator.check_schema(schema)
