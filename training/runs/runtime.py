"""What both trainers share: devices and threads, the transformers ``TrainingArguments`` built from a
config, the bridge that reports progress and honours cancellation, LoRA, and saving the result."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import EarlyStoppingCallback, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import PrinterCallback
from transformers.trainer_utils import get_last_checkpoint

from training.runs.config import CommonConfig
from training.runs.hooks import Hooks, RunResult

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def use_cuda() -> bool:
    return torch.cuda.is_available()


def set_threads(threads: int) -> None:
    """On a shared CPU, fewer threads than cores avoid the collapse of spinning OpenMP threads (the
    worker also sets OMP_WAIT_POLICY=PASSIVE)."""
    if threads and not use_cuda():
        torch.set_num_threads(threads)


def training_arguments(cfg: CommonConfig, work_dir: Path, has_validation: bool) -> TrainingArguments:
    """The same arguments on every device: CUDA with bf16 when present, else the CPU in fp32. Under
    torchrun/accelerate launch, transformers picks up the distributed environment by itself."""
    cuda = use_cuda()
    validate = "steps" if has_validation else "no"
    # Checkpoints every checkpoint_every steps to resume from (and at each validation when there is no
    # such cadence, to keep the best model); the latest and the best are kept.
    save_every = cfg.checkpoint_every or cfg.eval_every
    saves = "steps" if cfg.checkpoint_every or has_validation else "no"
    return TrainingArguments(
        output_dir=str(work_dir),
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.gradient_accumulation,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=cfg.warmup_ratio,  # a float below 1 is a ratio of the total steps
        num_train_epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        eval_strategy=validate,
        eval_steps=cfg.eval_every,
        save_strategy=saves,
        save_steps=save_every,
        save_total_limit=1,
        load_best_model_at_end=has_validation and cfg.early_stopping_patience > 0,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        logging_steps=1,
        report_to=[],
        disable_tqdm=True,
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        activation_checkpointing=cfg.gradient_checkpointing,
        remove_unused_columns=False,
        prediction_loss_only=True,  # validation needs the loss only, never the full logits kept
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,  # every weight takes part in every step (a search costs a pass)
        seed=cfg.seed,
        data_seed=cfg.seed,
    )


def log_entry(logs: dict[str, Any], step: int) -> dict[str, float]:
    """A logged dictionary as the run's timeline keeps it: finite numbers only, and the step."""
    entry = {k: float(v) for k, v in logs.items() if isinstance(v, int | float) and math.isfinite(v)}
    return entry | {"step": step}


class ProgressBridge(TrainerCallback):
    """Forwards the Trainer's logs to ``Hooks`` and stops training when asked to. Under a launcher every
    process runs it: the first process's hooks are the caller's, the others' are silent, and a cancel the
    first one reads is sent to all of them so that they stop at the same step (one that went on would
    wait for the others in its next gradient all-reduce)."""

    def __init__(self, hooks: Hooks) -> None:
        self.hooks, self.history, self.cancelled, self.resumed_from = hooks, [], False, 0

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step:  # continued from a checkpoint: its logs are the run's up to there
            self.resumed_from = state.global_step
            self.history = [
                log_entry(logs, int(logs.get("step", 0)))
                for logs in state.log_history
                if int(logs.get("step", 0)) <= state.global_step
            ]
            self.hooks.on_resume(state.global_step, list(self.history))

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        entry = log_entry(logs or {}, state.global_step)
        self.history.append(entry)
        self.hooks.on_progress(state.global_step, state.max_steps, entry)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # After the last step there is nothing left to stop: a cancel read there would throw the finished
        # model away (it is saved only when a run was not cancelled). Nor anything to resume: the Trainer's
        # checkpoint of the last step would be written only to be deleted with the run's state.
        if state.global_step >= state.max_steps:
            if state.save_steps and state.global_step % state.save_steps:
                control.should_save = False
            return
        stop = state.is_world_process_zero and self.hooks.should_stop()
        if args.world_size > 1:
            flag = torch.tensor([int(stop)], device=args.device)
            torch.distributed.broadcast(flag, src=0)
            stop = bool(flag.item())
        if stop:
            self.cancelled = True
            control.should_training_stop = True


def report_validation(trainer: Trainer, metrics: dict[str, float]) -> dict[str, float]:
    """What a trainer's own ``evaluate`` does with its figures: log them, tell the callbacks (progress,
    early stopping, the best checkpoint), and put the model back in training mode."""
    trainer.log(metrics)
    trainer.control = trainer.callback_handler.on_evaluate(
        trainer.args, trainer.state, trainer.control, metrics
    )
    trainer.model.train()
    return metrics


def final_validation(trainer: Trainer, bridge: ProgressBridge) -> dict[str, float]:
    """The validation metrics at the last step: the ones logged there, or a validation run now."""
    step = trainer.state.global_step
    for entry in reversed(bridge.history):
        if entry.get("step") == step and "eval_loss" in entry:
            return {k: v for k, v in entry.items() if k.startswith("eval_")}
    return {k: float(v) for k, v in trainer.evaluate().items() if isinstance(v, int | float)}


def start(cfg: CommonConfig, hooks: Hooks | None) -> Hooks:
    """What every run does first: refuse impossible settings, set threads and the seed."""
    cfg.check()
    set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    return hooks or Hooks()


def fit(
    trainer_class: type[Trainer],
    cfg: CommonConfig,
    model: Any,
    tokenizer: Any,
    datasets: tuple[list[Any], list[Any]],
    collator: Any,
    hooks: Hooks,
    **trainer_options: Any,
) -> tuple[Trainer, ProgressBridge, dict[str, float]]:
    """Train on the (train, validation) examples with progress through ``hooks``, early stopping when
    asked; the trainer, the bridge (history, cancelled, resumed_from) and the final metrics.

    Checkpoints go to ``cfg.state_dir`` and the run continues from the latest one there (the job keeps
    the folder until the run ends), or without one to a scratch folder beside the output, removed
    afterwards."""
    train, validation = datasets
    if cfg.state_dir:
        work_dir = Path(cfg.state_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
    else:
        work_dir = Path(tempfile.mkdtemp(prefix="run-", dir=Path(cfg.output_dir).parent))
    bridge = ProgressBridge(hooks)
    callbacks: list[Any] = [bridge]
    if validation and cfg.early_stopping_patience:
        callbacks.append(EarlyStoppingCallback(cfg.early_stopping_patience))
    try:
        trainer = trainer_class(
            model=model,
            args=training_arguments(cfg, work_dir, bool(validation)),
            train_dataset=train,
            eval_dataset=validation or None,
            data_collator=collator,
            processing_class=tokenizer,
            callbacks=callbacks,
            **trainer_options,
        )
        # Progress goes through the hooks (a progress bar, the run's row), not printed dictionaries.
        trainer.remove_callback(PrinterCallback)
        resume = get_last_checkpoint(str(work_dir)) if cfg.state_dir else None
        metrics = {"train_loss": float(trainer.train(resume_from_checkpoint=resume).training_loss)}
        if bridge.resumed_from:  # the Trainer's figure covers only the steps after the checkpoint
            losses = [entry["loss"] for entry in bridge.history if "loss" in entry]
            metrics["train_loss"] = sum(losses) / len(losses)
        if validation and not bridge.cancelled:
            metrics |= final_validation(trainer, bridge)
    finally:
        if not cfg.state_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    return trainer, bridge, metrics


def run_result(
    cfg: CommonConfig,
    trainer: Trainer,
    bridge: ProgressBridge,
    metrics: dict[str, Any],
    sizes: tuple[int, int],
) -> RunResult:
    return RunResult(
        output_dir=cfg.output_dir,
        steps=trainer.state.global_step,
        metrics=metrics,
        history=bridge.history,
        cancelled=bridge.cancelled,
        train_examples=sizes[0],
        validation_examples=sizes[1],
        resumed_from=bridge.resumed_from,
    )


def with_lora(model: Any, rank: int, task_type: str) -> Any:
    """Low-rank adapters on every linear layer of the backbone (peft); a new head stays fully trained."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=2 * rank,
        lora_dropout=0.05,
        target_modules="all-linear",
        task_type=task_type,
    )
    return get_peft_model(model, config)


def save_model(model: Any, tokenizer: Any, out: Path, summary: dict[str, Any]) -> None:
    """A plain Hugging Face folder (LoRA adapters merged) plus ``training.json`` with config and metrics."""
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "training.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
