"""The operator's list of OpenAI-compatible endpoints (``SAMPLING_ENDPOINTS``), read once at start-up.

Runs choose an endpoint by name; its URL and the name of its key variable come only from here, so no
request can point a worker at an address of its choosing (SSRF) or read a variable it names. Light: the
web app imports it to check settings and requests; nothing here opens a connection."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

from training.sampling.dialects import SERVERS
from training.sampling.endpoint import EndpointBackend  # stdlib only

POLICIES = ("prompted", "bc")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,49}")
_KNOWN = {"base_url", "model", "api_key_env", "policy", "timeout_s", "max_parallel", "max_retries", "server"}


@dataclass(frozen=True)
class EndpointConfig:
    """One endpoint: where it is, which model it serves and how that model is prompted (``prompted``: an
    instruct model given chat messages; ``bc``: a behaviour-cloned model given the bare observation) and what
    serves it (``server``: ``openai``, any OpenAI-compatible API, the standard fields only; ``vllm``,
    ``llamacpp``, ``tgi``: their grammar fields constrain commands and quotes; ``transformers``:
    ``transformers serve``; see ``dialects.py``)."""

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    policy: str = "prompted"
    timeout_s: float = 60.0
    max_parallel: int = 8
    max_retries: int = 5
    server: str = "openai"

    def public(self) -> dict[str, Any]:
        """What pages and the API may show (the key variable's name is the operator's business)."""
        shown = asdict(self)
        shown.pop("api_key_env")
        return shown


def parse_endpoints(text: str) -> dict[str, EndpointConfig]:
    """``{"name": {"base_url": ..., "model": ..., ...}}`` as JSON; ValueError saying what is wrong."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(raw, dict):
        raise ValueError('expected an object: {"name": {"base_url": ..., "model": ...}}')
    found = {}
    for name, values in raw.items():
        if name == "local" or not _NAME.fullmatch(str(name)):
            raise ValueError(f"{name!r}: an endpoint name is lowercase letters, digits, - and _, not 'local'")
        if not isinstance(values, dict):
            raise ValueError(f"{name}: expected an object with base_url and model")
        unknown = sorted(set(values) - _KNOWN)
        if unknown:
            expected = ", ".join(sorted(_KNOWN))
            raise ValueError(f"{name}: unknown key(s) {', '.join(unknown)}; expected {expected}")
        try:
            config = EndpointConfig(name=name, **values)
        except TypeError as exc:
            raise ValueError(f"{name}: {exc}") from None
        if config.policy not in POLICIES:
            raise ValueError(f"{name}: policy must be one of {', '.join(POLICIES)}")
        if config.server not in SERVERS:
            raise ValueError(f"{name}: server must be one of {', '.join(SERVERS)}")
        try:
            backend_from(config)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name}: {exc}") from None
        found[name] = config
    return found


def backend_from(config: EndpointConfig) -> EndpointBackend:
    """The ``EndpointBackend`` for an endpoint (checks its URL, key variable name and numbers)."""
    return EndpointBackend(
        config.base_url,
        config.model,
        api_key_env=config.api_key_env,
        timeout_s=config.timeout_s,
        max_parallel=config.max_parallel,
        max_retries=config.max_retries,
        server=config.server,
    )
