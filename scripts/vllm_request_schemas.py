"""Write vLLM's request schemas (the JSON Schema of its own request models, as its server publishes them in
``/openapi.json``) into tests/vllm/, for tests/test_vllm_requests.py to check the platform's vLLM dialect
against where vLLM is not installed.

    .venv/bin/python scripts/vllm_request_schemas.py            # needs `import vllm` to work

vLLM imports without a GPU: its request models need no CUDA. On a machine without it, a throwaway folder
works (what was used for 0.33.0; the test suite never installs vLLM):

    pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --platform manylinux_2_28_x86_64 vllm==0.33.0 -d /tmp/vllm
    unzip -q /tmp/vllm/vllm-*.whl 'vllm/*' -d /tmp/vllm/src
    pip install --no-deps --target /tmp/vllm/site cbor2 pyzmq aiohttp multidict yarl propcache \\
        aiohappyeyeballs aiosignal frozenlist openai-harmony pillow pybase64 cachetools msgspec \\
        cloudpickle uvloop py-cpuinfo
    PYTHONPATH=/tmp/vllm/src:/tmp/vllm/site .venv/bin/python scripts/vllm_request_schemas.py --version 0.33.0

vLLM is Apache-2.0 licensed; the files say which version they come from.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests" / "vllm"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", help="vLLM's version, where its package metadata is not installed")
    args = parser.parse_args()
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    version = args.version or importlib.metadata.version("vllm")
    FOLDER.mkdir(parents=True, exist_ok=True)
    for route, model in (("chat_completions", ChatCompletionRequest), ("completions", CompletionRequest)):
        schema = model.model_json_schema(mode="validation")
        schema["$comment"] = (
            f"vLLM {version} (Apache-2.0), {model.__module__}.{model.__name__}.model_json_schema(): "
            "written by scripts/vllm_request_schemas.py"
        )
        path = FOLDER / f"{route}.schema.json"
        path.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path.relative_to(ROOT)} ({len(schema['properties'])} fields)")


if __name__ == "__main__":
    main()
