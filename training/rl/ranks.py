"""The processes of an RL run, through ``accelerate``: one (a worker's job, a command), or several started
by ``accelerate launch`` or ``torchrun`` (``manage.py train_rl --questions-file``), each with its own device.

Each process holds the whole policy and samples its own contiguous share of a step's prompts, whole groups
only, so a group's advantages need nothing from the others. What they share: the number of tokens that
normalises the loss, the gradients (summed before clipping and the optimizer step, so every process takes
the same step and keeps the same weights), the step's figures, the KL-budget decision and a cancel. Not
DDP: the processes run different numbers of micro-batches (groups differ in length), which would leave
DDP's per-backward all-reduce waiting; one all-reduce of the summed gradients per optimizer step is all
the loop needs. Alone, every method is the identity and nothing is communicated."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast, gather_object

from training.runs.runtime import use_cuda

Item = TypeVar("Item")


class Ranks:
    """This process (``index`` of ``count``, on ``device``) among the run's processes."""

    def __init__(self, accelerator: Accelerator) -> None:
        self.accelerator = accelerator
        self.index, self.count = accelerator.process_index, accelerator.num_processes
        self.device = accelerator.device
        self.main = accelerator.is_main_process

    @classmethod
    def start(cls) -> Ranks:
        """CUDA when present, with bf16 autocast where the GPU has it (as BC and RM train), else the CPU in
        fp32; under a launcher, the process group it describes (NCCL on GPUs, gloo on CPUs)."""
        cuda = use_cuda()
        bf16 = cuda and torch.cuda.is_bf16_supported()
        return cls(Accelerator(cpu=not cuda, mixed_precision="bf16" if bf16 else "no"))

    def share(self, items: Sequence[Item]) -> tuple[int, list[Item]]:
        """This process's part of a step's items (``share``)."""
        return share(items, self.index, self.count)

    def sum(self, *values: float) -> list[float]:
        """Each value summed over the processes (float64: token counts stay exact)."""
        if self.count == 1:
            return list(values)
        summed = torch.tensor(values, dtype=torch.float64, device=self.device)
        return self.accelerator.reduce(summed, "sum").tolist()

    def before(self, count: int) -> int:
        """The sum of ``count`` over the processes before this one (every process must call it)."""
        if self.count == 1:
            return 0
        return sum(gather_object([count])[: self.index])

    def gather(self, items: list[Any]) -> list[Any]:
        """Every process's items, in process order (each process gets them all)."""
        return gather_object(items) if self.count > 1 else list(items)

    def main_says(self, flag: bool) -> bool:
        """The first process's ``flag`` (a cancel it read), on every process."""
        if self.count == 1:
            return flag
        return bool(broadcast(torch.tensor([int(flag)], device=self.device), from_process=0).item())

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Replace each gradient by its sum over the processes, in one flattened all-reduce (a parameter no
        micro-batch of this process reached counts as zero)."""
        if self.count == 1:
            return
        trained = [p for p in parameters if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in trained]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        torch.distributed.all_reduce(flat)
        offset = 0
        for parameter in trained:
            parameter.grad = flat[offset : offset + parameter.numel()].view_as(parameter)
            offset += parameter.numel()

    def same_weights(self, model: Any) -> str:
        """This process's ``weights_digest``, after checking every process ends with the same: a difference
        would mean the processes trained different policies and the saved one is only the first's."""
        digest = weights_digest(model)
        digests = self.gather([digest])
        if len(set(digests)) > 1:
            raise RuntimeError(f"the processes ended with different weights (digests {', '.join(digests)})")
        return digest

    @contextmanager
    def autocast(self) -> Iterator[None]:
        """bf16 autocast where ``start`` chose it, else nothing."""
        with self.accelerator.autocast():
            yield

    def wait(self) -> None:
        self.accelerator.wait_for_everyone()


def share(items: Sequence[Item], index: int, count: int) -> tuple[int, list[Item]]:
    """Process ``index`` of ``count``'s contiguous part of a step's items (sizes differing by at most one)
    and the step index of its first, from which its episodes' step-wide indices, and so their seeds,
    follow. Refused when a process would have none."""
    if len(items) < count:
        raise ValueError(
            f"questions_per_step: {len(items)} cannot be shared by {count} processes (each samples whole "
            f"groups of its own questions): set it to at least {count}"
        )
    size, extra = divmod(len(items), count)
    start = index * size + min(index, extra)
    return start, list(items[start : start + size + (index < extra)])


def weights_digest(model: Any) -> str:
    """SHA-256 of the parameters' names and fp32 values, in the model's order."""
    digest = hashlib.sha256()
    for name, parameter in model.named_parameters():
        digest.update(name.encode())
        digest.update(parameter.detach().float().cpu().numpy().tobytes())
    return digest.hexdigest()
