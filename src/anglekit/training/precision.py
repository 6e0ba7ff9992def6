"""Which arithmetic a training run uses: ``--precision`` (auto, fp32, fp16, bf16) -> Trainer flags.

``auto`` picks bf16 autocast on CUDA GPUs that support it (else fp16), bf16 autocast on CPUs with
native bf16 instructions (:func:`anglekit.model.hardware.cpu_has_native_bf16`: AVX512-BF16 or
AMX; 2.3x the fp32 step rate of MiniLM on an AVX512-BF16 EPYC) and fp32 elsewhere. Under autocast
the weights stay fp32 (master weights) and the objectives compute in fp32
(:meth:`anglekit.training.tasks.base.TrainingTask.fp32_loss`). To make ``auto`` keep fp32 on CPUs,
set :data:`AUTO_BF16_ON_CPU` to False, or the environment variable ``ANGLEKIT_AUTO_BF16=0`` (``1``
turns it on; the variable, when set, wins). The test suite sets it to 0, so that no test's outcome
depends on the CPU it runs on; the tests of the bf16 path ask for it explicitly.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from anglekit.errors import ConfigError

logger = logging.getLogger(__name__)

AUTO_BF16_ON_CPU = True
"""Whether ``--precision auto`` picks bf16 autocast on CPUs with native bf16 (the one switch;
:data:`AUTO_BF16_ENV` overrides it when set)."""
AUTO_BF16_ENV = "ANGLEKIT_AUTO_BF16"


def auto_bf16_on_cpu() -> bool:
    """:data:`AUTO_BF16_ON_CPU`, unless ``$ANGLEKIT_AUTO_BF16`` says 0 or 1 (anything else: a ConfigError)."""
    value = os.environ.get(AUTO_BF16_ENV)
    if value is None or value.strip() == "":
        return AUTO_BF16_ON_CPU
    if value.strip() not in ("0", "1"):
        raise ConfigError(f"${AUTO_BF16_ENV} must be 0 or 1, got {value!r}")
    return value.strip() == "1"


@dataclass(frozen=True)
class Precision:
    """The arithmetic a run uses: ``name`` (fp32, bf16 or fp16), how it was chosen, and the
    ``TrainingArguments`` keywords that give it (``bf16``, ``fp16``, ``use_cpu``)."""

    name: str
    requested: str
    reason: str
    on_cpu: bool

    def training_arguments(self) -> dict[str, bool]:
        # accelerate refuses bf16 without a GPU unless the run says it is on the CPU (use_cpu):
        # then it runs each forward under torch.autocast("cpu", dtype=torch.bfloat16).
        return {"bf16": self.name == "bf16", "fp16": self.name == "fp16", "use_cpu": self.on_cpu}

    @property
    def autocast_dtype(self) -> Any:
        """The ``torch.dtype`` the forward passes autocast to, None for fp32."""
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.name)


def _accelerator(device: str | None) -> str:
    """ "cuda", "mps" or "cpu": where the Trainer will run."""
    import torch

    if device == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def resolve_precision(precision: str, device: str | None) -> Precision:
    """The arithmetic for ``precision`` on ``device`` (None: the default device). fp16 off CUDA, and
    ``$ANGLEKIT_AUTO_BF16`` other than 0 or 1 on any machine, are ConfigErrors."""
    import torch

    from anglekit.model.hardware import cpu_has_native_bf16

    auto_bf16 = auto_bf16_on_cpu()  # read on every machine: a bad value is an error whatever the CPU
    where = _accelerator(device)
    on_cpu = where == "cpu"
    if precision == "auto":
        if where == "cuda":
            bf16 = torch.cuda.is_bf16_supported()
            return Precision("bf16" if bf16 else "fp16", precision, "GPU supports bf16" if bf16 else "GPU lacks bf16", False)
        if on_cpu and cpu_has_native_bf16():
            if auto_bf16:
                return Precision("bf16", precision, "CPU has native bf16 (avx512_bf16/amx_bf16)", True)
            return Precision("fp32", precision, f"CPU has native bf16 but AUTO_BF16_ON_CPU/${AUTO_BF16_ENV} is off", True)
        return Precision("fp32", precision, "CPU without native bf16" if on_cpu else f"{where} device", on_cpu)
    if precision == "fp16" and where != "cuda":
        raise ConfigError(f"precision fp16 needs a CUDA GPU (this run is on the {where}); use fp32 or bf16")
    if precision == "bf16" and on_cpu and not cpu_has_native_bf16():
        logger.warning("precision bf16 on a CPU without bf16 instructions (avx512_bf16/amx_bf16): it is emulated and slower than fp32")
    if precision not in ("fp32", "fp16", "bf16"):
        raise ConfigError(f"precision must be one of auto, fp32, fp16, bf16, got {precision!r}")
    return Precision(precision, precision, "requested", on_cpu)


def describe(precision: Precision) -> dict[str, Any]:
    """The choice as recorded in results.json and metrics.jsonl."""
    return {"precision": precision.name, "precision_requested": precision.requested, "precision_reason": precision.reason}
