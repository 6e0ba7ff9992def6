"""The speed swaps' one table and plan (issue 58): what applies and why the rest is skipped, the
plan recorded as applied, and probes that raise anything falling back with a warning."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from anglekit.errors import ConfigError, DuplicateNameError
from anglekit.plugins import Registry
from anglekit.training.run import train
from anglekit.training.speed import SWAPS, Matches, SpeedSettings, Swap, applied, plan
from anglekit.training.speed.fast_dropout import FastDropout
from anglekit.training.speed.swap import check_swap
from anglekit.training.speed.vocab_rows import CompactEmbedding

from helpers import train_config

FLAGS = {"compact_embeddings", "fast_dropout", "fused_layers", "pack_tokens", "fp32_attention"}


class Rows:
    """A tokenized training set as compact embeddings reads it."""

    token_ids = [[2, 10, 11, 3], [2, 12, 3]]


def _bert_settings(embedder: Any, **kwargs: Any) -> SpeedSettings:
    return SpeedSettings(**{"device": "cpu", "embedder": embedder, "dataset": Rows(), "pad_id": 0, **kwargs})


def _instance_forwards(model: nn.Module) -> list[nn.Module]:
    return [m for m in model.modules() if "forward" in m.__dict__]


# ====================================================================== the table


def test_the_table_has_one_entry_per_swap_with_the_five_flags_of_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    assert list(SWAPS) == ["compact_embeddings", "fast_dropout", "fused_rms_norm", "fused_mlp", "fused_lora", "packed_tokens", "fp32_attention",
                           "lora_input_casts"]  # fmt: skip
    assert {swap.flag for swap in SWAPS.values()} == FLAGS | {None}
    assert all(swap.devices == ("cpu",) for name, swap in SWAPS.items() if name != "lora_input_casts")
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    help_text = capsys.readouterr().out
    for flag in FLAGS:
        assert f"--no-{flag.replace('_', '-')}" in help_text, flag


def _swap(**kwargs: Any) -> Swap:
    values = {"label": "test", "does": "module(s) swapped", "flag": None, "devices": ("cpu",), "matches": Matches("linear layers", (("torch.nn.modules.linear", "Linear"),)),
              "apply": lambda model, modules, settings: _NoSwap()}  # fmt: skip
    return Swap(**{**values, **kwargs})


class _NoSwap:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("not a swap", "must be a Swap"),
        (_swap(flag="turbo"), "flag 'turbo' is not a true/false trainer setting"),
        (_swap(flag="batch_size"), "flag 'batch_size' is not a true/false"),
        (_swap(devices=("tpu",)), "devices must be None"),
        (_swap(devices=()), "devices must be None"),
    ],
)
def test_the_table_refuses_a_wrong_entry(item: Any, message: str) -> None:
    swaps: Registry[Swap] = Registry("speed swap", check=check_swap)
    with pytest.raises(ConfigError, match=message):
        swaps.register("bad", item)
    with pytest.raises(DuplicateNameError):
        SWAPS.register("fast_dropout", SWAPS.get("fast_dropout"))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"flags": {"fast_dropout": "yes"}}, "flags must be true or false: fast_dropout"),
        ({"device": "tpu"}, "device must be one of"),
    ],
)
def test_speed_settings_refuse_bad_values(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SpeedSettings(**settings)


def test_a_plan_refuses_a_flag_no_swap_has() -> None:
    with pytest.raises(ConfigError, match="unknown flag.*turbo"):
        plan(nn.Linear(2, 2), SpeedSettings(flags={"turbo": True}))


# ====================================================================== plan and record


def test_a_bert_plan_swaps_exactly_what_it_records_and_undoes_it(load_bert: Any) -> None:
    embedder = load_bert()
    embedder.train()
    original_embedding = embedder.backbone.get_input_embeddings()
    dropouts = [m for m in embedder.modules() if type(m) is nn.Dropout and m.p > 0]  # counted independently of the table
    layers = [m for m in embedder.modules() if type(m).__name__ == "BertLayer"]
    speed = plan(embedder, _bert_settings(embedder))
    assert [d.name for d in speed.applied] == ["compact_embeddings", "fast_dropout", "packed_tokens"]
    assert not _instance_forwards(embedder) and not any(isinstance(m, FastDropout) for m in embedder.modules())  # planning swaps nothing
    with applied(speed) as done:
        record = done.record()
        assert record["applied"]["fast_dropout"] == {"flag": "fast_dropout", "modules": len(dropouts), "classes": ["Dropout"]}
        assert sum(isinstance(m, FastDropout) for m in embedder.modules()) == len(dropouts) > 0
        assert record["applied"]["packed_tokens"] == {"flag": "pack_tokens", "modules": len(layers), "classes": ["BertLayer"]}
        assert {id(m) for m in _instance_forwards(embedder)} == {id(m) for m in layers}
        assert isinstance(embedder.backbone.get_input_embeddings(), CompactEmbedding)
        assert record["applied"]["compact_embeddings"]["note"].startswith("training ")
        assert record["skipped"] == {
            "fused_rms_norm": "no module matches (the RMSNorms of Llama-style decoders (Llama, Mistral, Qwen2/3, SmolLM3), or a layer transformers' kernels mark RMSNorm)",
            "fused_mlp": "no module matches (the SiLU-gated MLPs of Llama-style decoders (Llama, Mistral, Qwen2/3, SmolLM3))",
            "fused_lora": "no module matches (PEFT's LoRA Linear layers)",
            "fp32_attention": "needs bf16 autocast (this run computes in fp32)",
            "lora_input_casts": "needs autocast (this run computes in fp32)",
        }
        assert (record["architecture"], record["device"]) == ("bert", "cpu")
        assert done.flags() == {"compact_embeddings": True, "fast_dropout": True, "fused_layers": False, "pack_tokens": True, "fp32_attention": False}
    assert not _instance_forwards(embedder) and not any(isinstance(m, FastDropout) for m in embedder.modules())
    assert embedder.backbone.get_input_embeddings() is original_embedding


def test_each_flag_turns_its_swaps_off_and_says_so(load_bert: Any) -> None:
    embedder = load_bert()
    speed = plan(embedder, _bert_settings(embedder, flags=dict.fromkeys(FLAGS, False)))
    assert speed.applied == []
    for decision in speed.skipped:
        if decision.swap.flag is not None:
            assert decision.reason == f"off ({decision.swap.flag} false, --no-{decision.swap.flag.replace('_', '-')})"


def test_on_a_gpu_there_is_no_speed_swap_for_the_architecture_and_the_log_says_so(load_bert: Any, caplog: pytest.LogCaptureFixture) -> None:
    embedder = load_bert()
    caplog.set_level(logging.INFO, logger="anglekit.training.speed.plan")
    speed = plan(embedder, _bert_settings(embedder, device="cuda"))  # planned only: nothing runs on the device
    with applied(speed):
        pass
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1 and messages[0].startswith("no speed swap for architecture bert on cuda (fp32)\n  skipped compact_embeddings: for cpu only")
    assert all(d.reason == "for cpu only, where it was measured; this run is on cuda" for d in speed.skipped if d.swap.devices is not None)


# ====================================================================== no swap can stop a run


def test_a_probe_that_meets_a_transformers_without_masking_utils_falls_back_with_a_warning(
    load_bert: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = load_bert()
    # As before transformers 4.56 (pyproject allows 4.45): masking_utils without create_bidirectional_mask.
    monkeypatch.delattr("transformers.masking_utils.create_bidirectional_mask")
    with caplog.at_level(logging.WARNING):
        speed = plan(embedder, _bert_settings(embedder))
    reason = dict((d.name, d.reason) for d in speed.skipped)["packed_tokens"]
    assert reason.startswith("BertLayer could not be checked (ImportError: ")
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith("packed tokens: BertLayer could not be checked (ImportError") for r in caplog.records)
    assert [d.name for d in speed.applied] == ["compact_embeddings", "fast_dropout"]  # the others still apply


@pytest.mark.parametrize("error", [ImportError, AttributeError, KeyError, RuntimeError, NotImplementedError])
def test_whatever_a_probe_or_finder_raises_skips_only_its_swap(error: type[Exception], caplog: pytest.LogCaptureFixture) -> None:
    def raising(*args: Any) -> Any:
        raise error("an older library")

    swaps: Registry[Swap] = Registry("speed swap", check=check_swap)
    swaps.register("probe_raises", _swap(label="probing", probe=raising))
    swaps.register("finder_raises", _swap(label="finding", matches=Matches("anything", find=raising)))
    swaps.register("works", _swap(label="working", probe=lambda model, module, settings: None))
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    with caplog.at_level(logging.WARNING):
        speed = plan(model, SpeedSettings(), swaps)
    assert [d.name for d in speed.applied] == ["works"] and len(speed.applied[0].modules) == 2
    skipped = {d.name: d.reason for d in speed.skipped}
    assert skipped == {
        "probe_raises": f"its check raised {error.__name__}: {error('an older library')}",
        "finder_raises": f"its check raised {error.__name__}: {error('an older library')}",
    }
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2 and "probe_raises (probing)" in warned[0] and "finder_raises (finding)" in warned[1]


def test_a_swap_that_fails_to_apply_is_recorded_as_skipped_and_the_others_are_undone(caplog: pytest.LogCaptureFixture) -> None:
    entered: list[str] = []

    class Tracks:
        def __enter__(self) -> str:
            entered.append("in")
            return "a note"

        def __exit__(self, *exc: Any) -> None:
            entered.append("out")

    def breaks(model: Any, modules: Any, settings: Any) -> Any:
        raise AttributeError("'Linear' object has no attribute 'lora_A'")

    swaps: Registry[Swap] = Registry("speed swap", check=check_swap)
    swaps.register("first", _swap(apply=lambda model, modules, settings: Tracks()))
    swaps.register("second", _swap(apply=breaks))
    speed = plan(nn.Linear(2, 2), SpeedSettings(), swaps)
    assert [d.name for d in speed.applied] == ["first", "second"]
    with caplog.at_level(logging.INFO), pytest.raises(RuntimeError, match="the loop failed"), applied(speed) as done:
        assert entered == ["in"]
        assert done.record()["applied"] == {"first": {"flag": None, "modules": 1, "classes": ["Linear"], "note": "a note"}}
        assert done.record()["skipped"] == {"second": "applying it raised AttributeError: 'Linear' object has no attribute 'lora_A'"}
        raise RuntimeError("the loop failed")
    assert entered == ["in", "out"]
    assert any(r.levelno == logging.WARNING and "speed swap second (test) is skipped" in r.getMessage() for r in caplog.records)


class _MarkedNorm(nn.Module):
    """A norm of another family that transformers' kernels mark RMSNorm, computing Llama's maths."""

    kernel_layer_name = "RMSNorm"

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(size) + 0.5)
        self.variance_epsilon = 1e-6

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return LlamaRMSNorm.forward(self, hidden_states)  # type: ignore[arg-type]


class _OnePlusNorm(_MarkedNorm):
    """Marked RMSNorm too, but Gemma-style: scales by ``1 + weight``."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        x = hidden_states.float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * (1.0 + self.weight.float())).to(hidden_states.dtype)


def test_a_layer_kernels_mark_rmsnorm_is_swapped_where_its_probe_agrees(caplog: pytest.LogCaptureFixture) -> None:
    model = nn.Sequential(_MarkedNorm(8), _OnePlusNorm(8), nn.Linear(8, 8))
    x = torch.randn(3, 8)
    expected = model(x)
    with caplog.at_level(logging.WARNING):
        speed = plan(model, SpeedSettings())
    assert not caplog.records  # another variant of a marked layer is not a warning
    decision = next(d for d in speed.applied if d.name == "fused_rms_norm")
    assert decision.modules == [model[0]]
    assert speed.record()["applied"]["fused_rms_norm"]["refused"] == {"_OnePlusNorm": "_OnePlusNorm computes something else in this installation"}
    with applied(speed):
        assert _instance_forwards(model) == [model[0]]
        assert torch.equal(model(x), expected)
    assert _instance_forwards(model) == []


def test_fast_dropout_hands_its_mask_and_scale_through_a_public_seam() -> None:
    dropout = FastDropout(0.25)
    x = torch.randn(6, 40)
    torch.manual_seed(3)
    out = dropout(x)
    torch.manual_seed(3)
    keep, scale = dropout.mask_and_scale(x)
    assert keep.dtype == torch.uint8 and keep.shape == x.shape and scale == 1 / (1 - 0.25)
    assert torch.equal(out, torch.addcmul(x.new_zeros(()), x, keep, value=scale))
    assert FastDropout(0.0).train().mask_and_scale(x) is None and dropout.eval().mask_and_scale(x) is None


# ====================================================================== a run records what applied


def test_a_run_records_the_plan_as_applied_not_as_asked(tiny_bert_dir: Path, copy_model: Any, pair_file: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    model_dir = copy_model(tiny_bert_dir)  # no dropout: fast dropout, asked, finds nothing to swap
    config = (model_dir / "config.json").read_text().replace('"hidden_dropout_prob": 0.1', '"hidden_dropout_prob": 0.0')
    (model_dir / "config.json").write_text(config.replace('"attention_probs_dropout_prob": 0.1', '"attention_probs_dropout_prob": 0.0'))
    monkeypatch.delattr("transformers.masking_utils.create_bidirectional_mask")  # and packed tokens' probe cannot import what it needs
    caplog.set_level(logging.INFO, logger="anglekit.training.speed.plan")
    result = train(train_config(model_dir, pair_file, tmp_path / "run", max_steps=2, batch_size=8, positive_threshold=4.0, device="cpu",
                                precision="fp32", fast_dropout=True, pack_tokens=True))  # fmt: skip
    assert result.steps == 2
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text(encoding="utf-8"))
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert saved["speed_swaps"] == results["speed_swaps"] == result.speed_swaps
    assert list(saved["speed_swaps"]["applied"]) == ["compact_embeddings"]
    assert saved["speed_swaps"]["skipped"]["fast_dropout"] == "no module matches (torch.nn.Dropout with p > 0)"
    assert saved["speed_swaps"]["skipped"]["packed_tokens"].startswith("BertLayer could not be checked (ImportError")
    assert (saved["train"]["fast_dropout"], saved["train"]["pack_tokens"], saved["train"]["compact_embeddings"]) == (False, False, True)
    plans = [r.getMessage() for r in caplog.records if r.name == "anglekit.training.speed.plan" and r.levelno == logging.INFO]
    assert len(plans) == 1 and plans[0].startswith("speed swaps for bert on cpu (fp32): 1 applied\n  compact embeddings: 1 input embedding(s)")


def test_a_bf16_run_whose_attention_probe_meets_an_older_transformers_keeps_sdpa(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    import transformers

    def missing(cls: Any, *args: Any) -> None:  # as a transformers whose AttentionInterface has no register
        raise AttributeError(f"type object {cls.__name__!r} has no attribute 'register'")

    monkeypatch.setattr(transformers.AttentionInterface, "register", classmethod(missing))
    caplog.set_level(logging.WARNING)
    settings = {"model": str(tiny_llama_dir), "train_data": str(pair_file), "output_dir": str(tmp_path / "run"), "prompt": "paper", "lora": True,
                "lora_rank": 4, "max_steps": 2, "batch_size": 4, "positive_threshold": 4.0, "device": "cpu", "precision": "bf16",
                "attn_implementation": "sdpa", "quiet": True}  # fmt: skip
    from anglekit.training.config import TrainConfig

    result = train(TrainConfig.from_dict(settings))
    assert result.steps == 2 and result.speed_swaps is not None
    assert result.speed_swaps["skipped"]["fp32_attention"].startswith("its check raised AttributeError")
    assert any("speed swap fp32_attention (fp32 attention) is skipped: its check raised AttributeError" in r.getMessage() for r in caplog.records)
    assert "fused_rms_norm" in result.speed_swaps["applied"]
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text(encoding="utf-8"))["train"]
    assert saved["fp32_attention"] is False and saved["fused_layers"] is True
