"""LoRA on a tiny random Llama (built by the session fixture): only adapters train, save / load /
merge give identical embeddings, training with --lora, resuming from a checkpoint and from saved
adapters, and the merge-lora command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from anglekit.cli import main
from anglekit.errors import ConfigError
from anglekit.llm.lora import LoraSettings, parse_target_modules
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.run import train

import helpers
from helpers import train_config

pytest.importorskip("peft")

TEXTS = ["a man is playing the guitar .", "dog", "the old woman walks her small white dog in the park .", 'he said "no" ?']
LINEAR = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _randomise_adapters(embedder: Embedder, seed: int = 0) -> None:
    """Fresh LoRA B matrices are zero (the adapter starts as a no-op); give them values."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in embedder.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)


@pytest.fixture
def lora_llama(tiny_llama_dir: Path) -> Embedder:
    embedder = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu")
    embedder.add_lora(rank=4, alpha=8, dropout=0.0)
    _randomise_adapters(embedder)
    return embedder


# ------------------------------------------------------------------ adapters


def test_only_lora_parameters_are_trainable(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu")
    before = embedder.encode(TEXTS)
    total = sum(p.numel() for p in embedder.parameters())
    embedder.add_lora(rank=4, alpha=8, dropout=0.1)
    trainable = {n: p for n, p in embedder.named_parameters() if p.requires_grad}
    assert trainable and all(".lora_A." in n or ".lora_B." in n for n in trainable)
    # all-linear: every projection of every block, and nothing else (no embeddings, norms, head).
    targets = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable}
    assert targets == LINEAR
    layers = {n.split("layers.")[1].split(".")[0] for n in trainable}
    assert layers == {"0", "1"}
    assert not any("embed" in n or "norm" in n or "lm_head" in n for n in trainable)
    assert sum(p.numel() for p in embedder.parameters()) - total == sum(p.numel() for p in trainable.values())
    # A fresh adapter is a no-op (B = 0): same vectors as the base model.
    np.testing.assert_allclose(embedder.encode(TEXTS), before, atol=1e-6)
    # Gradients reach the adapters only.
    batch = embedder.tokenize(TEXTS)
    embedder.train()
    embedder(**batch).pow(2).sum().backward()
    assert all(p.grad is not None for p in trainable.values())
    assert all(p.grad is None for n, p in embedder.named_parameters() if n not in trainable)


def test_target_modules_by_name(tiny_llama_dir: Path) -> None:
    embedder = Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(rank=2, target_modules="q_proj, v_proj")
    targets = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n, p in embedder.named_parameters() if p.requires_grad}
    assert targets == {"q_proj", "v_proj"}
    with pytest.raises(ConfigError, match="LoRA"):
        Embedder.from_pretrained(tiny_llama_dir, device="cpu").add_lora(target_modules=["no_such_layer"])


@pytest.mark.parametrize("kwargs", [{"rank": 0}, {"rank": 2.5}, {"alpha": 0}, {"dropout": 1.0}, {"dropout": -0.1}, {"target_modules": "q_proj,,v"}])
def test_bad_lora_settings_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        LoraSettings(**kwargs)


def test_parse_target_modules() -> None:
    assert parse_target_modules(None) == "all-linear"
    assert parse_target_modules("all-linear") == "all-linear"
    assert parse_target_modules(" q_proj ,v_proj") == ["q_proj", "v_proj"]


def test_adding_adapters_twice_is_refused(lora_llama: Embedder) -> None:
    with pytest.raises(ConfigError, match="merge"):
        lora_llama.add_lora()


def test_save_load_merge_give_identical_embeddings(lora_llama: Embedder, tiny_llama_dir: Path, tmp_path: Path) -> None:
    expected = lora_llama.encode(TEXTS, batch_size=3)
    saved = lora_llama.save_pretrained(tmp_path / "adapters")
    files = {p.name for p in saved.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "anglekit_config.json", "tokenizer.json"} <= files
    assert "config.json" not in files and "model.safetensors" not in files  # adapters alone
    config = json.loads((saved / "anglekit_config.json").read_text())
    assert config["base_model"] == str(tiny_llama_dir.resolve())
    assert config["prompt"] == 'Summarize sentence "{text}" in one word:"' and config["prompt_preprocess"] is True
    adapter_bytes = (saved / "adapter_model.safetensors").stat().st_size
    assert adapter_bytes < sum(p.stat().st_size for p in tiny_llama_dir.glob("*.safetensors"))

    loaded = Embedder.from_pretrained(saved, device="cpu")
    assert loaded.has_lora and loaded.config == lora_llama.config
    np.testing.assert_allclose(loaded.encode(TEXTS), expected, atol=1e-5)
    assert not any(p.requires_grad for p in loaded.parameters())  # loaded for inference

    merged = loaded.merge_lora()
    assert not merged.has_lora and merged.config.base_model is None
    assert type(merged.backbone).__name__ == "LlamaModel"
    np.testing.assert_allclose(merged.encode(TEXTS), expected, atol=1e-5)
    standalone = merged.save_pretrained(tmp_path / "merged")
    assert (standalone / "config.json").is_file() and not (standalone / "adapter_config.json").exists()
    again = Embedder.from_pretrained(standalone, device="cpu")
    assert not again.has_lora
    np.testing.assert_allclose(again.encode(TEXTS), expected, atol=1e-5)


def test_adapters_load_onto_a_moved_base(lora_llama: Embedder, tiny_llama_dir: Path, tmp_path: Path, copy_model: Any) -> None:
    expected = lora_llama.encode(TEXTS)
    saved = lora_llama.save_pretrained(tmp_path / "adapters")
    moved = copy_model(tiny_llama_dir, "moved-base")
    config = json.loads((saved / "anglekit_config.json").read_text())
    config["base_model"] = str(tmp_path / "gone")
    (saved / "anglekit_config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="gone"):
        Embedder.from_pretrained(saved, device="cpu")
    loaded = Embedder.from_pretrained(saved, base_model=str(moved), device="cpu")
    assert loaded.config.base_model == str(moved)
    np.testing.assert_allclose(loaded.encode(TEXTS), expected, atol=1e-5)


def test_base_model_only_applies_to_adapters(tiny_llama_dir: Path) -> None:
    with pytest.raises(ConfigError, match="base_model"):
        Embedder.from_pretrained(tiny_llama_dir, base_model="x", device="cpu")


def test_merge_without_adapters_is_an_error(tiny_llama_dir: Path) -> None:
    with pytest.raises(ConfigError, match="no LoRA adapters"):
        Embedder.from_pretrained(tiny_llama_dir, device="cpu").merge_lora()


def test_cli_merge_lora(lora_llama: Embedder, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    expected = lora_llama.encode(TEXTS)
    saved = lora_llama.save_pretrained(tmp_path / "adapters")
    assert main(["merge-lora", str(saved), "--output-dir", str(tmp_path / "merged")]) == 0
    assert "standalone model written" in capsys.readouterr().out
    merged = Embedder.from_pretrained(tmp_path / "merged", device="cpu")
    assert not merged.has_lora
    np.testing.assert_allclose(merged.encode(TEXTS), expected, atol=1e-5)
    assert main(["merge-lora", str(saved), "--output-dir", str(saved)]) == 2
    assert main(["merge-lora", str(tmp_path / "merged"), "--output-dir", str(tmp_path / "m2")]) == 2


# ------------------------------------------------------------------ training


def _config(base: Path, pair_file: Path, out: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        base,
        pair_file,
        out,
        **{
            "prompt": "paper",
            "lora": True,
            "lora_rank": 4,
            "lora_alpha": 8.0,
            "max_steps": 6,
            "batch_size": 4,
            "logging_steps": 1,
            "learning_rate": 5e-3,
            "positive_threshold": 4.0,
            "device": "cpu",
            "precision": "fp32",
            "seed": 3,
            **kwargs,
        },
    )


def test_train_config_lora_settings() -> None:
    config = TrainConfig.from_dict(dict(lora=True, lora_rank=8, lora_target_modules="q_proj,v_proj"))
    assert config.lora.settings() == LoraSettings(rank=8, target_modules=("q_proj", "v_proj"))
    assert TrainConfig.from_dict(dict(lora=True)).lora.settings() == LoraSettings()
    with pytest.raises(ConfigError, match="lora_rank"):
        TrainConfig.from_dict(dict(lora_rank=8))  # without lora: true
    with pytest.raises(ConfigError, match="lora_rank"):
        TrainConfig.from_dict(dict(init_adapters="a", lora_rank=8))
    with pytest.raises(ConfigError, match="second set"):
        TrainConfig.from_dict(dict(init_adapters="a", lora=True))
    with pytest.raises(ConfigError, match="rank"):
        TrainConfig.from_dict(dict(lora=True, lora_rank=0))
    with pytest.raises(ConfigError, match="QLoRA"):
        TrainConfig.from_dict(dict(load_in_kbit=4))
    with pytest.raises(ConfigError, match="load_in_kbit"):
        TrainConfig.from_dict(dict(load_in_kbit=3, lora=True))
    with pytest.raises(ConfigError, match="model_dtype"):
        TrainConfig.from_dict(dict(model_dtype="int8"))
    with pytest.raises(ConfigError, match="preset"):
        TrainConfig.from_dict(dict(prompt="summarize"))
    TrainConfig.from_dict(dict(init_adapters="a", train_data="d")).require_inputs()  # the adapters name the model


def test_lora_training_saves_adapters_that_reload(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    out = tmp_path / "run"
    result = train(_config(tiny_llama_dir, pair_file, out, save_steps=3, gradient_checkpointing=True))
    assert result.steps == 6
    records = helpers.read_jsonl(out / "metrics.jsonl")
    assert any({"loss_cosine", "loss_ibn", "loss_angle"} <= set(r) for r in records)
    model_dir = out / "model"
    assert (model_dir / "adapter_config.json").is_file() and not (model_dir / "config.json").exists()
    checkpoint = load_file(str(out / "checkpoint-6" / "model.safetensors"))
    # Checkpoints hold the trained adapters only, never the frozen base.
    assert any("lora_A" in k for k in checkpoint) and any("lora_B" in k for k in checkpoint)
    assert all(".lora_" in k for k in checkpoint), sorted(k for k in checkpoint if ".lora_" not in k)[:3]
    trained = Embedder.from_pretrained(model_dir, device="cpu")
    base = Embedder.from_pretrained(tiny_llama_dir, prompt="paper", device="cpu")
    assert trained.has_lora and trained.config.prompt == base.config.prompt
    # The adapters learned something, and the base weights did not move.
    assert not np.allclose(trained.encode(TEXTS), base.encode(TEXTS), atol=1e-4)
    np.testing.assert_allclose(trained.merge_lora().encode(TEXTS), Embedder.from_pretrained(model_dir, device="cpu").encode(TEXTS), atol=1e-5)


def test_lora_resume_from_checkpoint_matches_an_uninterrupted_run(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """Train 6 steps with a checkpoint every 2; then take the same run, drop what came after
    checkpoint-4 (as if killed there) and resume: it redoes steps 5-6 and ends where the first did."""
    straight = tmp_path / "straight"
    first = train(_config(tiny_llama_dir, pair_file, straight, save_steps=2, save_total_limit=3))
    interrupted = tmp_path / "interrupted"
    shutil.copytree(straight, interrupted)
    shutil.rmtree(interrupted / "checkpoint-6")
    shutil.rmtree(interrupted / "model")
    (interrupted / "results.json").unlink()
    resumed = train(_config(tiny_llama_dir, pair_file, interrupted, save_steps=2, save_total_limit=3, resume=True))
    assert first.steps == resumed.steps == 6
    steps = [r["step"] for r in helpers.read_jsonl(interrupted / "metrics.jsonl") if "loss" in r]
    assert steps == [1, 2, 3, 4, 5, 6]
    state = json.loads((interrupted / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6
    a = Embedder.from_pretrained(straight / "model", device="cpu").encode(TEXTS)
    b = Embedder.from_pretrained(interrupted / "model", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_lora_best_checkpoint_is_reloaded_from_adapter_only_weights(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    """With dev evaluation the best checkpoint (adapters only) is loaded back at the end. The dev
    set is the training set with reversed scores, so training makes it worse and the best
    checkpoint is an early one: the saved model must hold its adapters, not the last step's."""
    from safetensors.torch import load_file

    records = helpers.read_jsonl(pair_file)
    reversed_dev = tmp_path / "reversed-dev.jsonl"
    reversed_dev.write_text("".join(json.dumps({**r, "label": 5.0 - float(r["label"])}) + "\n" for r in records))
    out = tmp_path / "run"
    result = train(_config(tiny_llama_dir, pair_file, out, dev_data=str(reversed_dev), eval_steps=2, save_total_limit=5))
    assert result.best_checkpoint is not None and Path(result.best_checkpoint).name != "checkpoint-6"
    saved = load_file(str(out / "model" / "adapter_model.safetensors"))

    def matches(checkpoint: Path) -> bool:
        adapters = load_file(str(checkpoint / "model.safetensors"))
        assert len(adapters) == len(saved)
        # PEFT's saved names drop the "backbone." prefix and the adapter name.
        return all(torch.equal(saved[k.replace("backbone.", "", 1).replace(".default", "")], v) for k, v in adapters.items())

    assert matches(Path(result.best_checkpoint))
    assert not matches(out / "checkpoint-6")


def test_lora_resume_refuses_a_checkpoint_without_the_trained_weights(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    out = tmp_path / "run"
    train(_config(tiny_llama_dir, pair_file, out, max_steps=4, save_steps=2, save_total_limit=3))
    shutil.rmtree(out / "checkpoint-4")
    weights = out / "checkpoint-2" / "model.safetensors"
    kept = {k: v for k, v in load_file(str(weights)).items() if "lora_B" not in k}
    save_file(kept, str(weights))
    with pytest.raises(RuntimeError, match="lacks .* trained weight"):
        train(_config(tiny_llama_dir, pair_file, out, max_steps=4, save_steps=2, resume=True))


def test_training_continues_from_saved_adapters(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    first = tmp_path / "first"
    train(_config(tiny_llama_dir, pair_file, first, max_steps=3))
    after_first = Embedder.from_pretrained(first / "model", device="cpu").encode(TEXTS)
    second = tmp_path / "second"
    config = _config(tiny_llama_dir, pair_file, second, max_steps=3, model="", init_adapters=str(first / "model"), lora=False, lora_rank=None, lora_alpha=None)
    result = train(config)
    assert result.steps == 3
    continued = Embedder.from_pretrained(second / "model", device="cpu")
    assert continued.has_lora and continued.config.base_model == str(tiny_llama_dir.resolve())
    adapters = json.loads((second / "model" / "adapter_config.json").read_text())
    assert adapters["r"] == 4  # the first run's rank, kept
    assert not np.allclose(continued.encode(TEXTS), after_first, atol=1e-5)


def test_init_adapters_must_hold_adapters(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    config = _config(tiny_llama_dir, pair_file, tmp_path / "run", model="", init_adapters=str(tiny_llama_dir), lora=False, lora_rank=None, lora_alpha=None)
    with pytest.raises(ConfigError, match="no LoRA adapters"):
        train(config)


def test_cli_train_with_lora(tiny_llama_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = [
        "train", "--model", str(tiny_llama_dir), "--train-data", str(pair_file), "--output-dir", str(out),
        "--prompt", "paper", "--lora", "--lora-rank", "2", "--lora-target-modules", "q_proj,v_proj",
        "--max-steps", "2", "--batch-size", "4", "--positive-threshold", "4.0", "--device", "cpu",
        "--precision", "fp32", "--quiet",
    ]  # fmt: skip
    assert main(argv) == 0
    adapters = json.loads((out / "model" / "adapter_config.json").read_text())
    assert adapters["r"] == 2 and set(adapters["target_modules"]) == {"q_proj", "v_proj"}
