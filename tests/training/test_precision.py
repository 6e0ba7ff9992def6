"""Mixed precision on the CPU: what ``--precision auto`` picks (CPU bf16 flags simulated), that the
objectives compute in fp32 under bf16 autocast, that bf16 gradients agree with fp32 ones, and that
the choice is recorded in results.json and metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor
from transformers import TrainerCallback

from anglekit.errors import ConfigError
from anglekit.losses import AnglEObjective, ObjectiveConfig
from anglekit.model import hardware
from anglekit.model.embedder import Embedder
from anglekit.training import precision as precision_module
from anglekit.training.config import TrainConfig
from anglekit.training.precision import resolve_precision
from anglekit.training.run import train
from anglekit.training.tasks import PairTask

import helpers
from helpers import train_config

TEXTS = [
    "a man plays a guitar", "the dog runs", "two dogs run in the park", "wow", "a woman is cooking",
    "the cat sleeps on the sofa", "a child rides a bike", "people walk in the rain", "the sun is hot",
    "a man plays the piano", "the dog sleeps", "a bird sings",
]  # fmt: skip


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None:
        monkeypatch.setattr(mps, "is_available", lambda: False)


def _simulate_cpu(monkeypatch: pytest.MonkeyPatch, flags: set[str]) -> None:
    """A CPU with ``flags``, and auto's own default (conftest turns auto-bf16 off for other tests)."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.delenv(precision_module.AUTO_BF16_ENV, raising=False)


# ====================================================================== detection


@pytest.mark.parametrize(
    ("text", "native"),
    [
        ("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n", True),
        ("processor\t: 0\nflags\t\t: fpu sse amx_bf16 amx_tile amx_int8\n", True),
        ("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw\n", False),  # AVX512 alone: bf16 emulated
        ("processor\t: 0\nFeatures\t: fp asimd bf16\n", False),  # ARM's bf16 is not one of ours
    ],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, native: bool) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text, encoding="utf-8")
    monkeypatch.setattr(hardware, "CPUINFO", cpuinfo)
    assert hardware.cpu_has_native_bf16() is native
    assert hardware.bf16_flags_present() == sorted({"avx512_bf16", "amx_bf16"} & set(text.split()))


def test_without_cpuinfo_torch_capability_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "CPUINFO", tmp_path / "absent")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert hardware.cpu_has_native_bf16() is False
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AMX")
    assert hardware.cpu_has_native_bf16() is True


# ====================================================================== what auto picks


@pytest.mark.parametrize("device", [None, "cpu"])
def test_auto_picks_bf16_on_a_cpu_with_native_bf16(no_gpu: None, monkeypatch: pytest.MonkeyPatch, device: str | None) -> None:
    _simulate_cpu(monkeypatch, {"avx512f", "avx512_bf16"})
    chosen = resolve_precision("auto", device)
    assert chosen.name == "bf16" and "native bf16" in chosen.reason
    # use_cpu: without it accelerate refuses bf16 off a GPU ("Your setup doesn't support bf16/gpu")
    assert chosen.training_arguments() == {"bf16": True, "fp16": False, "use_cpu": True}


@pytest.mark.parametrize("device", [None, "cpu"])
def test_auto_keeps_fp32_on_a_cpu_without_bf16(no_gpu: None, monkeypatch: pytest.MonkeyPatch, device: str | None) -> None:
    _simulate_cpu(monkeypatch, {"avx2", "avx512f", "avx512bw"})
    chosen = resolve_precision("auto", device)
    assert chosen.name == "fp32" and chosen.training_arguments()["bf16"] is False


def test_auto_bf16_on_cpu_is_one_switch(no_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _simulate_cpu(monkeypatch, {"avx512_bf16"})
    monkeypatch.setattr(precision_module, "AUTO_BF16_ON_CPU", False)
    assert resolve_precision("auto", None).name == "fp32"


@pytest.mark.parametrize(("value", "expected"), [("0", "fp32"), ("1", "bf16"), (" 1 ", "bf16"), ("", "bf16")])
def test_the_environment_switches_auto_bf16(no_gpu: None, monkeypatch: pytest.MonkeyPatch, value: str, expected: str) -> None:
    _simulate_cpu(monkeypatch, {"avx512_bf16"})
    monkeypatch.setenv(precision_module.AUTO_BF16_ENV, value)
    assert resolve_precision("auto", "cpu").name == expected
    monkeypatch.setattr(precision_module, "AUTO_BF16_ON_CPU", False)
    assert resolve_precision("auto", "cpu").name == ("fp32" if value.strip() in ("", "0") else "bf16")  # the variable, when set, wins


@pytest.mark.parametrize("value", ["yes", "2", "true"])
def test_a_bad_environment_switch_is_a_config_error(no_gpu: None, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    _simulate_cpu(monkeypatch, {"avx512_bf16"})
    monkeypatch.setenv(precision_module.AUTO_BF16_ENV, value)
    with pytest.raises(ConfigError, match="ANGLEKIT_AUTO_BF16 must be 0 or 1"):
        resolve_precision("auto", "cpu")


@pytest.mark.parametrize("flags", [{"avx512f", "avx512_bf16"}, {"avx2", "avx512f"}], ids=["cpu-with-bf16", "cpu-without-bf16"])
@pytest.mark.parametrize("requested", ["auto", "fp32", "bf16"])
@pytest.mark.parametrize("device", [None, "cpu"])
def test_a_bad_environment_switch_is_refused_whatever_the_cpu(
    no_gpu: None, monkeypatch: pytest.MonkeyPatch, flags: set[str], requested: str, device: str | None
) -> None:
    """The value is checked before the CPU is asked: ``yes`` is refused on a CPU without bf16 too
    (where the switch would change nothing), and whatever the precision asked for."""
    _simulate_cpu(monkeypatch, flags)
    monkeypatch.setenv(precision_module.AUTO_BF16_ENV, "yes")
    with pytest.raises(ConfigError, match=r"^\$ANGLEKIT_AUTO_BF16 must be 0 or 1, got 'yes'$"):
        resolve_precision(requested, device)
    monkeypatch.setenv(precision_module.AUTO_BF16_ENV, "1")  # a good value: the choice of before
    assert resolve_precision(requested, device).name == (requested if requested != "auto" else "bf16" if "avx512_bf16" in flags else "fp32")


@pytest.mark.parametrize("flags", [{"avx512f", "avx512_bf16"}, {"avx2"}], ids=["cpu-with-bf16", "cpu-without-bf16"])
def test_train_refuses_a_bad_environment_switch_before_writing(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, no_gpu: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: set[str]
) -> None:
    """Through ``anglekit train``: one line naming the variable and its value, exit 2, no output folder."""
    _simulate_cpu(monkeypatch, flags)
    monkeypatch.setenv(precision_module.AUTO_BF16_ENV, "yes")
    out = tmp_path / "run"
    code, _, err = helpers.run_cli(
        ["train", "--model", str(tiny_bert_dir), "--train-data", str(pair_file), "--output-dir", str(out), "--device", "cpu"], capsys
    )
    assert code == 2
    assert err == "anglekit train: error: $ANGLEKIT_AUTO_BF16 must be 0 or 1, got 'yes'\n"
    assert not out.exists()


def test_the_suite_runs_fp32_whatever_the_cpu(no_gpu: None) -> None:
    """conftest turns auto-bf16 off: a test that does not ask for bf16 trains in fp32 on every CPU."""
    assert resolve_precision("auto", "cpu").name == "fp32"


def test_bf16_on_a_cpu_without_the_flag_still_works_with_a_warning(no_gpu: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _simulate_cpu(monkeypatch, {"avx2"})
    chosen = resolve_precision("bf16", None)
    assert chosen.training_arguments() == {"bf16": True, "fp16": False, "use_cpu": True}
    assert "emulated" in caplog.text


@pytest.mark.parametrize("device", [None, "cpu"])
def test_fp16_on_a_cpu_is_a_config_error(no_gpu: None, device: str | None) -> None:
    with pytest.raises(ConfigError, match="fp16 needs a CUDA GPU"):
        resolve_precision("fp16", device)


def test_an_unknown_precision_is_refused_by_the_config() -> None:
    with pytest.raises(ConfigError, match="precision"):
        TrainConfig.from_dict({"model": "m", "precision": "bf8"})


# ====================================================================== fp32 objective under autocast


def _pair_batch(model: Embedder) -> dict[str, Tensor]:
    padded = model.tokenize(TEXTS)
    return {**padded, "labels": torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]), "text_ids": torch.arange(12)}


class DtypeSpy(AnglEObjective):
    """The paper objective, recording the dtype of what it receives and of its loss."""

    seen: list[torch.dtype]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        out = super().forward(*args, **kwargs)
        self.seen = [args[0].dtype, args[1].dtype, out.loss.dtype]
        return out


def test_objective_computes_in_fp32_under_bf16_autocast() -> None:
    """The pooled bf16 embeddings go up to fp32 and autocast is off inside the objective: the loss
    equals the fp32 loss of the same (bf16-rounded) vectors to 1e-6. Computed in bf16 (autocast's
    matmuls) it differs by ~1e-3, so this fails if the objective runs under autocast."""
    torch.manual_seed(0)
    vectors = torch.randn(12, 64).to(torch.bfloat16)
    inputs = {"labels": torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]), "text_ids": torch.arange(12)}
    objective = DtypeSpy(ObjectiveConfig(positive_threshold=0.5))
    task = PairTask()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, ours, _ = task.fp32_loss(helpers.SoloServices(), objective, vectors, inputs)
    assert objective.seen == [torch.float32] * 3
    _, reference, _ = task.loss_from_vectors(helpers.SoloServices(), objective, vectors.double(), inputs)
    assert float(ours.loss) == pytest.approx(float(reference.loss), abs=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the control: autocast left on
        _, careless, _ = task.loss_from_vectors(helpers.SoloServices(), objective, vectors.float(), inputs)
    assert abs(float(careless.loss) - float(reference.loss)) > 1e-5


def test_bf16_and_fp32_gradients_of_a_tiny_model_agree(tiny_bert_dir: Path) -> None:
    """One step's gradient under bf16 autocast vs fp32 (dropout off, same weights): cosine > 0.99
    and norm within 5% over all weights together, loss within 1%. The weights stay fp32."""
    model = Embedder.from_pretrained(tiny_bert_dir, pooling="cls", device="cpu")
    model.eval()
    task, objective = PairTask(), AnglEObjective(ObjectiveConfig(positive_threshold=0.5))
    inputs = _pair_batch(model)

    def step(autocast: bool) -> tuple[float, Tensor]:
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            _, out, _ = task.loss(helpers.SoloServices(), objective, model, inputs)
        out.loss.backward()
        grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
        assert all(g.dtype == torch.float32 for g in grads)
        return float(out.loss.detach()), torch.cat(grads).double()

    loss32, grad32 = step(False)
    loss16, grad16 = step(True)
    assert loss16 == pytest.approx(loss32, rel=0.01)
    assert float(torch.nn.functional.cosine_similarity(grad16, grad32, dim=0)) > 0.99
    assert float(grad16.norm() / grad32.norm()) == pytest.approx(1.0, abs=0.05)
    assert all(p.dtype == torch.float32 for p in model.parameters())


# ====================================================================== recorded


class LinearDtypes(TrainerCallback):
    """Records the dtypes of the training forward passes' Linear outputs (bf16 under autocast)."""

    def __init__(self) -> None:
        self.dtypes: set[torch.dtype] = set()
        self.fused: bool | None = None
        self.handles: list[Any] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None, **kwargs: Any) -> None:
        self.fused = getattr(optimizer, "optimizer", optimizer).defaults.get("fused")
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                self.handles.append(module.register_forward_hook(lambda m, i, out: self.dtypes.add(out.dtype) if m.training else None))

    def on_train_end(self, *args: Any, **kwargs: Any) -> None:
        for handle in self.handles:
            handle.remove()


def _config(tiny_bert_dir: Path, pair_file: Path, output_dir: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        tiny_bert_dir,
        pair_file,
        output_dir,
        **{"max_steps": 2, "batch_size": 4, "logging_steps": 1, "learning_rate": 1e-3, "positive_threshold": 4.0, **kwargs},
    )


@pytest.mark.parametrize(("flags", "expected"), [({"avx512_bf16"}, "bf16"), ({"avx2"}, "fp32")])
def test_auto_choice_is_logged_and_recorded(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, no_gpu: None, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture, flags: set[str], expected: str,
) -> None:  # fmt: skip
    """No --device (the default device, which the bug made refuse bf16 on a CPU) and --precision auto."""
    _simulate_cpu(monkeypatch, flags)
    caplog.set_level("INFO", logger="anglekit.training.run")
    seen = LinearDtypes()
    result = train(_config(tiny_bert_dir, pair_file, tmp_path / "run", precision="auto"), callbacks=[seen])
    assert result.precision == expected
    assert seen.dtypes == {torch.bfloat16 if expected == "bf16" else torch.float32}  # autocast really on (or off)
    assert seen.fused is True  # transformers' default optim, adamw_torch_fused, runs on the CPU (8x foreach AdamW's step there)
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["precision"] == expected
    assert "peak_gpu_memory_mb" in results and results["peak_gpu_memory_mb"] is None  # a CPU run: no GPU figure
    records = helpers.read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert records[0]["event"] == "train_begin" and records[0]["precision"] == expected and records[0]["precision_requested"] == "auto"
    assert [r["step"] for r in records if "loss" in r] == [1, 2]
    assert f"precision {expected} (auto:" in caplog.text
