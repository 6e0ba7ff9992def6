"""The training loop's module swaps: compact embeddings (only the rows the training set reaches train,
and the model is the one full training gives) and fast dropout (16-bit masks, dropout's distribution)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn

from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.run import train
from anglekit.training.speed.fast_dropout import LEVELS, FastDropout, faster_dropout
from anglekit.training.speed.vocab_rows import CompactEmbedding, UnreachedTokenError, compacted, reachable_rows, why_not

from helpers import train_config

# ====================================================================== fast dropout


def test_fast_dropout_drops_p_of_every_lane_and_keeps_the_mean() -> None:
    torch.manual_seed(0)
    p = 0.1
    out = FastDropout(p).train()(torch.ones(1 << 22))
    p_used = round(p * LEVELS) / LEVELS
    dropped = out == 0
    sigma = (p_used * (1 - p_used) / out.numel()) ** 0.5
    assert abs(dropped.float().mean().item() - p_used) < 5 * sigma
    # Four elements share one 64-bit draw: each 16-bit lane must be uniform (random_() without a
    # range leaves the top bit 0, which would keep every fourth element).
    for lane in dropped.view(-1, 4).float().mean(dim=0).tolist():
        assert abs(lane - p_used) < 5 * 2 * sigma
    values = out.unique().tolist()
    assert len(values) == 2 and values[0] == 0.0 and values[1] == pytest.approx(1 / (1 - p_used))
    assert abs(out.mean().item() - 1.0) < 5 * sigma / (1 - p_used)  # unbiased: the expectation is the input


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_fast_dropout_matches_nn_dropout_in_distribution(p: float) -> None:
    torch.manual_seed(1)
    fast = FastDropout(p).train()(torch.ones(1 << 20))
    reference = nn.Dropout(p).train()(torch.ones(1 << 20))
    assert abs((fast == 0).float().mean().item() - (reference == 0).float().mean().item()) < 0.005
    assert abs(fast.mean().item() - reference.mean().item()) < 0.02


def test_fast_dropout_is_seeded_shaped_typed_and_differentiable() -> None:
    module = FastDropout(0.3).train()
    x = torch.randn(3, 5, 7, dtype=torch.bfloat16, requires_grad=True)
    torch.manual_seed(7)
    first = module(x)
    torch.manual_seed(7)
    again = module(x)
    assert torch.equal(first, again) and first.shape == x.shape and first.dtype == torch.bfloat16
    assert not torch.equal(first, module(x))  # the generator moved on
    first.float().sum().backward()
    kept = first != 0
    assert torch.equal(x.grad != 0, kept)  # the gradient flows through the kept elements only, scaled
    assert torch.allclose(x.grad[kept].float(), torch.full_like(x.grad[kept].float(), module.scale), rtol=1e-2)


def test_fast_dropout_is_the_identity_in_eval_and_at_p_0() -> None:
    x = torch.randn(4, 9)
    assert FastDropout(0.5).eval()(x) is x
    assert FastDropout(0.0).train()(x) is x


@pytest.mark.parametrize("p", [-0.1, 1.0, 2.0])
def test_fast_dropout_refuses_a_probability_out_of_range(p: float) -> None:
    with pytest.raises(ValueError, match="dropout probability"):
        FastDropout(p)


def test_faster_dropout_swaps_and_restores_every_dropout(load_bert: Any) -> None:
    embedder = load_bert()
    before = [(name, module) for name, module in embedder.named_modules() if type(module) is nn.Dropout]
    assert before
    embedder.train()
    with faster_dropout(embedder, enabled=True, device="cpu") as swapped:
        assert swapped == len(before)
        now = dict(embedder.named_modules())
        assert all(type(now[name]) is FastDropout and now[name].p == module.p and now[name].training for name, module in before)
        embedder(**embedder.tokenize(["a man plays a guitar", "the dog"]))  # the model runs with them
    after = dict(embedder.named_modules())
    assert all(after[name] is module for name, module in before)  # the same objects are back


def test_faster_dropout_restores_after_an_error_and_stays_off_where_asked(load_bert: Any) -> None:
    embedder = load_bert()
    before = {name: module for name, module in embedder.named_modules() if type(module) is nn.Dropout}
    with pytest.raises(RuntimeError, match="boom"), faster_dropout(embedder, enabled=True, device="cpu"):
        raise RuntimeError("boom")
    assert all(dict(embedder.named_modules())[name] is module for name, module in before.items())
    for enabled, device in ((False, "cpu"), (True, "cuda")):  # off, or CUDA's fused dropout
        with faster_dropout(embedder, enabled=enabled, device=device) as swapped:
            assert swapped == 0
            assert not any(isinstance(m, FastDropout) for m in embedder.modules())


# ====================================================================== compact embeddings


def _step(model: nn.Module, embedding: nn.Module, ids: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    loss = (model(embedding(ids)) ** 2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in list(model.parameters()) + list(embedding.parameters()) if p.requires_grad], 1.0)
    optimizer.step()


def _train(compact: bool, batches: list[torch.Tensor], steps: int = 6) -> tuple[nn.Embedding, nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    embedding = nn.Embedding(50, 8, padding_idx=0)
    head = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
    start = embedding.weight.detach().clone()
    module: nn.Module = CompactEmbedding(embedding, torch.cat(batches).flatten()) if compact else embedding
    trainable = [p for p in list(head.parameters()) + list(module.parameters()) if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=0.05, weight_decay=0.0, fused=True)
    for step in range(steps):
        _step(head, module, batches[step % len(batches)], optimizer)
    if compact:
        assert module.restore() is embedding
    return embedding, head, start


def test_compact_rows_train_as_the_whole_matrix_does() -> None:
    batches = [torch.tensor([[1, 5, 7, 0], [3, 5, 9, 11]]), torch.tensor([[2, 7, 7, 13], [0, 0, 1, 4]])]
    full, full_head, start = _train(False, batches)
    compact, compact_head, _ = _train(True, batches)
    reached = torch.unique(torch.cat(batches).flatten())
    unreached = torch.ones(50, dtype=torch.bool)
    unreached[reached] = False
    assert not torch.equal(full.weight[reached], start[reached])  # training moved the reached rows
    assert torch.equal(full.weight[unreached], start[unreached])  # and AdamW left the others (weight decay 0)
    assert torch.equal(compact.weight[unreached], start[unreached])
    assert torch.allclose(compact.weight, full.weight, atol=1e-6, rtol=0)
    for a, b in zip(compact_head.parameters(), full_head.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)
    assert compact.weight.requires_grad  # trainable again, as before


def test_a_token_outside_the_rows_is_an_error_in_training_and_looked_up_outside() -> None:
    torch.manual_seed(0)
    embedding = nn.Embedding(20, 4, padding_idx=0)
    compact = CompactEmbedding(embedding, torch.tensor([0, 2, 3]))
    with torch.no_grad():
        compact.rows_weight.add_(1.0)  # as if trained
    compact.train()
    with pytest.raises(UnreachedTokenError, match=r"\[7\]"):
        compact(torch.tensor([[2, 7]]))
    compact.eval()
    ids = torch.tensor([[2, 7, 0], [3, 19, 2]])
    looked_up = compact(ids)
    compact.sync()
    assert torch.equal(looked_up, nn.functional.embedding(ids, compact.weight))
    with torch.no_grad():  # training mode without gradients (e.g. GradCache's first pass) looks up too
        compact.train()
        assert torch.equal(compact(ids), looked_up)


def test_state_dicts_keep_the_original_key_synced_and_load_from_either_kind() -> None:
    torch.manual_seed(0)
    embedding = nn.Embedding(12, 4)
    compact = CompactEmbedding(embedding, torch.tensor([1, 4]))
    with torch.no_grad():
        compact.rows_weight.mul_(3.0)
    state = compact.state_dict()
    assert set(state) == {"weight", "rows_weight"}
    assert torch.equal(state["weight"][torch.tensor([1, 4])], compact.rows_weight.detach())  # synced when taken
    written_without = {"weight": torch.randn(12, 4)}
    result = compact.load_state_dict(written_without, strict=True)
    assert not result.missing_keys and torch.equal(compact.rows_weight.detach(), written_without["weight"][torch.tensor([1, 4])])


def test_why_not_names_each_inexact_case() -> None:
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
    embedding = model[0]
    assert why_not(embedding, model, weight_decay=0.0, optim=None) is None
    assert why_not(embedding, model, weight_decay=0.0, optim="adamw_torch") is None
    assert "weight decay" in why_not(embedding, model, weight_decay=0.01, optim=None)
    assert "not AdamW" in why_not(embedding, model, weight_decay=0.0, optim="adafactor")
    model[1].weight = embedding.weight  # tied: [10, 4] both
    assert "tied" in why_not(embedding, model, weight_decay=0.0, optim=None)
    frozen = nn.Embedding(10, 4)
    frozen.weight.requires_grad_(False)
    assert "frozen" in why_not(frozen, frozen, weight_decay=0.0, optim=None)
    assert "max_norm" in why_not(nn.Embedding(10, 4, max_norm=1.0), nn.Embedding(1, 1), weight_decay=0.0, optim=None)

    class Scaled(nn.Embedding):
        pass

    assert "not a plain nn.Embedding" in why_not(Scaled(10, 4), nn.Embedding(1, 1), weight_decay=0.0, optim=None)


def test_reachable_rows_are_the_sorted_distinct_ids_with_the_extras() -> None:
    assert reachable_rows([[5, 3, 3], [9], []], [0, None, 3]).tolist() == [0, 3, 5, 9]


def test_compacted_swaps_the_backbone_embedding_and_puts_it_back_trained(load_bert: Any) -> None:
    embedder = load_bert()
    original = embedder.backbone.get_input_embeddings()

    class Rows:
        token_ids = [[2, 10, 11, 3], [2, 12, 3]]

    with compacted(embedder, embedder, Rows(), enabled=True, weight_decay=0.0, optim=None, pad_id=0) as compact:
        assert compact is embedder.backbone.get_input_embeddings()
        assert compact.rows.tolist() == sorted({0, 2, 3, 10, 11, 12} | set(embedder.tokenizer.all_special_ids))
        with torch.no_grad():
            compact.rows_weight.add_(1.0)
    assert embedder.backbone.get_input_embeddings() is original
    assert original.weight.requires_grad
    assert torch.equal(original.weight[compact.rows], compact.rows_weight.detach())
    for enabled, weight_decay, rows in ((False, 0.0, Rows()), (True, 0.1, Rows()), (True, 0.0, object())):
        with compacted(embedder, embedder, rows, enabled=enabled, weight_decay=weight_decay, optim=None) as compact:
            assert compact is None and embedder.backbone.get_input_embeddings() is original
    on_gpu = SimpleNamespace(backbone=embedder.backbone, tokenizer=embedder.tokenizer, device=torch.device("cuda"))
    with compacted(on_gpu, embedder, Rows(), enabled=True, weight_decay=0.0, optim=None) as compact:  # the check would sync a GPU
        assert compact is None and embedder.backbone.get_input_embeddings() is original


# ====================================================================== end to end


def _config(tiny_bert_dir: Path, pair_file: Path, output_dir: Path, **kwargs: Any) -> TrainConfig:
    return train_config(
        tiny_bert_dir,
        pair_file,
        output_dir,
        **{
            "max_steps": 4,
            "batch_size": 8,
            "learning_rate": 1e-3,
            "positive_threshold": 4.0,
            "device": "cpu",
            "precision": "fp32",
            "fast_dropout": False,
            **kwargs,
        },
    )


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return dict(Embedder.from_pretrained(model_dir, device="cpu").backbone.state_dict())


def test_training_with_compact_embeddings_gives_the_full_runs_model(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="anglekit.training.speed.plan")
    on = train(_config(tiny_bert_dir, pair_file, tmp_path / "on"))
    assert any("\n  compact embeddings: 1 input embedding(s) train only the rows the training set reaches (Embedding; training " in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert on.speed_swaps is not None and on.speed_swaps["applied"]["compact_embeddings"]["note"].startswith("training ")
    off = train(_config(tiny_bert_dir, pair_file, tmp_path / "off", compact_embeddings=False))
    assert any("\n  skipped compact_embeddings: off (compact_embeddings false" in r.getMessage() for r in caplog.records)
    start, a, b = _weights(tiny_bert_dir), _weights(on.model_dir), _weights(off.model_dir)
    assert set(a) == set(b)  # the saved model has the original keys
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5, rtol=0), key
    word = "embeddings.word_embeddings.weight"
    moved = (b[word] != start[word]).any(dim=1)
    assert 0 < int(moved.sum()) < len(moved)  # some rows trained, some were never reached
    assert torch.equal(a[word][~moved], start[word][~moved])
    saved = json.loads((tmp_path / "on" / "train_config.json").read_text(encoding="utf-8"))["train"]
    assert saved["compact_embeddings"] is True and saved["fast_dropout"] is False


def test_a_run_resumes_from_a_compact_checkpoint(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    straight = train(_config(tiny_bert_dir, pair_file, tmp_path / "straight", max_steps=6, save_steps=3))
    resumed_dir = tmp_path / "resumed"
    resumed_dir.mkdir()
    shutil.copytree(tmp_path / "straight" / "checkpoint-3", resumed_dir / "checkpoint-3")
    shutil.copy(tmp_path / "straight" / "train_config.json", resumed_dir / "train_config.json")
    resumed = train(_config(tiny_bert_dir, pair_file, resumed_dir, max_steps=6, save_steps=3, resume=True))
    assert resumed.steps == 6
    a, b = _weights(straight.model_dir), _weights(resumed.model_dir)
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5, rtol=0), key


def test_fast_dropout_trains_end_to_end_and_is_recorded(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    result = train(_config(tiny_bert_dir, pair_file, tmp_path / "run", fast_dropout=True))
    assert result.steps == 4
    embedder = Embedder.from_pretrained(result.model_dir, device="cpu")
    assert not any(isinstance(m, FastDropout) for m in embedder.modules())
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text(encoding="utf-8"))["train"]
    assert saved["fast_dropout"] is True


@pytest.mark.parametrize("key", ["compact_embeddings", "fast_dropout", "fp32_attention", "fused_layers", "pack_tokens"])
@pytest.mark.parametrize(("value", "message"), [("yes", "must be bool"), (3, "must be bool"), ([1], "must be bool"), (None, "may not be empty")])
def test_the_swap_settings_refuse_what_is_not_a_bool(key: str, value: Any, message: str) -> None:
    from anglekit.errors import ConfigError

    with pytest.raises(ConfigError, match=f"{key} {message}"):
        TrainConfig.from_dict({key: value})


@pytest.mark.parametrize("flag", ["--compact-embeddings=3", "--fast-dropout=no", "--fp32-attention=yes", "--fused-layers=1", "--pack-tokens=no"])
def test_the_swap_flags_take_no_value(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", flag])
    assert exit_info.value.code == 2 and "ignored explicit argument" in capsys.readouterr().err
