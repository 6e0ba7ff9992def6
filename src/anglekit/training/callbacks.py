"""Trainer callbacks: metrics as JSONL, and a progress bar that shows each loss component."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from anglekit.io.atomic import atomic_write_text, settle_modes


class JsonlMetricsCallback(TrainerCallback):
    """Append every log record (step, loss, components, eval metrics) to ``metrics.jsonl``.

    The file is opened in append mode so a resumed run continues it (dropping what an interrupted run
    logged past the checkpoint it resumes from); each line is flushed at once.
    ``run_facts`` (e.g. the precision ``auto`` chose) are written as one record at the start of
    training, with ``"event": "train_begin"``.
    """

    def __init__(self, path: str | Path, run_facts: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.run_facts = dict(run_facts or {})

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        if state.global_step > 0:
            self._drop_after(state.global_step)
        if self.run_facts:
            self._write({"event": "train_begin", "step": state.global_step, **self.run_facts})

    def _drop_after(self, step: int) -> None:
        """A run resumed from its checkpoint at ``step`` trains the steps after it again: the records an
        interrupted run logged past the checkpoint are dropped, so no step is in the file twice, and so
        is a last line the kill cut short (no newline, not JSON), which the next record would otherwise
        be glued to. Every other line stays as it was."""
        if not self.path.is_file():
            return
        lines = self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if not _logged_after(line, step)]
        if kept and not kept[-1].endswith("\n"):
            if _is_json(kept[-1]):
                kept[-1] += "\n"
            else:
                kept.pop()
        if kept != lines:
            atomic_write_text(self.path, "".join(kept))

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        self._write({"step": state.global_step, "epoch": state.epoch, **logs})

    def _write(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=float) + "\n")


def _is_json(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _logged_after(line: str, step: int) -> bool:
    """Whether a metrics.jsonl line is a record of a step after ``step`` (lines that are not records stay)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return False
    at = record.get("step") if isinstance(record, dict) else None
    return isinstance(at, int) and not isinstance(at, bool) and at > step


class ComponentProgressCallback(TrainerCallback):
    """A tqdm bar over optimisation steps whose postfix shows the latest loss and its components."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.postfix: dict[str, str] = {}

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=state.max_steps, initial=state.global_step, desc="train", unit="step", dynamic_ncols=True)

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.bar is None or not logs:
            return
        for key, value in logs.items():
            if (key == "loss" or key.startswith("loss_") or key == "eval_spearman") and isinstance(value, (int, float)) and math.isfinite(value):
                self.postfix[key] = f"{value:.4g}"
        self.bar.set_postfix(self.postfix, refresh=True)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class ProbeCallback(TrainerCallback):
    """Every ``steps`` optimisation steps, log the training-dynamics probes as one record.

    The record holds the means of the batch probes gathered since the last record (``probe_*``,
    from :class:`~anglekit.training.probes.ProbeAccumulator`) and, when ``dataset_probe`` is
    given, the probes of a fixed labelled set measured now in eval mode (``probe_dev_*``). The
    dataset probes are also measured once before the first step, so curves start at step 0; the
    batch probes of a run that ends between two records are written at its end.
    Records go to ``metrics.jsonl`` (same file and format as the log records) and to the
    trainer state's log history.
    """

    def __init__(
        self,
        path: str | Path,
        steps: int,
        accumulator: Any | None = None,
        dataset_probe: Any | None = None,
    ) -> None:
        if steps < 1:
            raise ValueError(f"steps must be positive, got {steps}")
        self.path = Path(path)
        self.steps = steps
        self.accumulator = accumulator
        self.dataset_probe = dataset_probe

    def _write(self, state: TrainerState, values: dict[str, float]) -> None:
        if not values or not state.is_world_process_zero:
            return
        record = {"step": state.global_step, "epoch": state.epoch, **values}
        state.log_history.append(dict(record))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=float) + "\n")

    def _measure(self, state: TrainerState) -> dict[str, float]:
        values: dict[str, float] = {}
        if self.accumulator is not None:
            values.update({f"probe_{k}": v for k, v in self.accumulator.flush().items()})
        if self.dataset_probe is not None and state.is_world_process_zero:
            values.update({f"probe_dev_{k}": v for k, v in self.dataset_probe().items()})
        return values

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.global_step == 0 and self.dataset_probe is not None and state.is_world_process_zero:
            self._write(state, {f"probe_dev_{k}": v for k, v in self.dataset_probe().items()})

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if state.global_step % self.steps == 0:
            self._write(state, self._measure(state))

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        # The batches since the last record (a run that stops between two records) get one too.
        if state.global_step % self.steps != 0 and self.accumulator is not None:
            self._write(state, {f"probe_{k}": v for k, v in self.accumulator.flush().items()})


class SettleModesCallback(TrainerCallback):
    """After each checkpoint, give its folders and files the modes ``mkdir`` and ``open()`` would
    under the umask (safetensors writes its files 0600 whatever the umask)."""

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:

        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and folder.is_dir():
            settle_modes(folder)
