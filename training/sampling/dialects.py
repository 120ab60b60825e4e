"""What each kind of OpenAI-compatible server takes beyond the standard fields (``EndpointConfig.server``).

- ``openai`` (the default; hosted APIs and any other server): the standard fields only. A hosted API refuses
  fields it does not know, so nothing else is ever sent; decoding is not constrained.
- ``vllm``: ``structured_outputs: {"regex": ...}`` (vLLM >= 0.10.2; the ``guided_*`` fields before it were
  removed in 0.12), on prompts and chats.
- ``llamacpp`` (llama.cpp's ``llama-server``, or ``llama-cpp-python``'s server): ``grammar``, the step's
  grammar in GBNF.
- ``tgi`` (text-generation-inference): ``response_format: {"type": "regex", "value": ...}`` on chats; TGI's
  ``/v1/completions`` takes no grammar, so raw prompts (a BC policy) go unconstrained.
- ``transformers`` (``transformers serve``): no constrained decoding (it refuses unknown fields, and ignores
  ``response_format``). It samples only when the served folder's generation config says ``do_sample``, which
  a converted checkpoint does not (temperature is then ignored, every seed gives the same greedy text, and a
  policy repeats one invalid action to the limit): each request asks for sampling itself, through the
  server's ``generation_config`` field, when its temperature is above 0.

A request's ``json_schema`` (a structured answer, e.g. a judge's verdict) goes as OpenAI's structured-outputs
form ``response_format: {"type": "json_schema", ...}`` to vLLM (prompts and chats), as ``response_format:
{"type": "json_object", "schema": schema}`` to llama.cpp's chats (the form both its C++ ``llama-server`` and
``llama-cpp-python``'s server take: the latter refuses the ``json_schema`` type; tested against it) and as
``json_schema`` on its raw ``/v1/completions`` (``llama-server``'s field; ``llama-cpp-python`` ignores it),
and as TGI's ``response_format: {"type": "json_object", "value": schema}`` on chats; ``openai`` and
``transformers`` get nothing (a generic server may refuse ``json_schema``, ``transformers serve`` ignores
it) and the caller parses the text.

``request_fields`` returns the extra fields and the kind of constraint the request carried ("commands
(regex)", "quotes (gbnf)", "json_schema", "none"), which the run reports per action. Stdlib only.
"""

from __future__ import annotations

import json
from typing import Any

from training.sampling.grammar import grammar_for, to_gbnf, to_regex
from training.sampling.types import CompletionRequest, JsonSchema

SERVERS = ("openai", "vllm", "llamacpp", "tgi", "transformers")
UNCONSTRAINED = "none"
JSON_SCHEMA = "json_schema"


def request_fields(server: str, request: CompletionRequest) -> tuple[dict[str, Any], str]:
    """(fields to add to the request body, the constraint it carries) for a server of kind ``server``."""
    if server not in SERVERS:
        raise ValueError(f"unknown server kind {server!r}; expected one of {', '.join(SERVERS)}")
    fields: dict[str, Any] = {}
    if server == "transformers":
        fields["generation_config"] = json.dumps({"do_sample": request.temperature > 0})
    chat = request.messages is not None
    if request.json_schema is not None:
        schema = _schema_fields(server, request.json_schema, chat)
        return (fields | schema, JSON_SCHEMA) if schema else (fields, UNCONSTRAINED)
    grammar = grammar_for(request.constraint)
    if grammar is None or server in ("openai", "transformers") or (server == "tgi" and not chat):
        return fields, UNCONSTRAINED
    if server == "llamacpp":
        return fields | {"grammar": to_gbnf(grammar)}, f"{grammar.kind} (gbnf)"
    if server == "vllm":
        return fields | {"structured_outputs": {"regex": to_regex(grammar)}}, f"{grammar.kind} (regex)"
    regex = {"type": "regex", "value": to_regex(grammar)}  # tgi, on a chat
    return fields | {"response_format": regex}, f"{grammar.kind} (regex)"


def _schema_fields(server: str, wanted: JsonSchema, chat: bool) -> dict[str, Any]:
    """The fields asking ``server`` for ``wanted``; empty where it takes none."""
    if server == "vllm":
        form = {"name": wanted.name, "schema": wanted.schema, "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": form}}
    if server == "llamacpp" and chat:
        # The form both llama.cpp servers take: llama-cpp-python's refuses OpenAI's "json_schema" type.
        return {"response_format": {"type": "json_object", "schema": wanted.schema}}
    if server == "llamacpp":  # llama-server's own field on raw completions
        return {"json_schema": wanted.schema}
    if server == "tgi" and chat:  # TGI's guidance: a JSON schema under "value"
        return {"response_format": {"type": "json_object", "value": wanted.schema}}
    return {}
