"""n-tuple training (anchor, positive, negative_1..negative_n): the collator and its padding, the
task losses against independent computations, GradCache (the full-batch gradient), cross-process
gather (two gloo processes against one process with the whole batch), token-budget batches,
Matryoshka, and end-to-end runs for a contrastive and an AnglE pair objective."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from anglekit.errors import DataError
from anglekit.losses import AnglEObjective, ContrastiveObjective, MatryoshkaConfig, MatryoshkaObjective, ObjectiveConfig, info_nce_loss
from anglekit.model.embedder import Embedder
from anglekit.training.config import TrainConfig
from anglekit.training.gradcache import gradcache_step
from anglekit.training.run import train
from anglekit.training.tasks import PairTask, TripletTask
from anglekit.training.tasks.contrastive import TokenizedTriplets, TripletCollator

import helpers
from helpers import train_config

Services = helpers.SoloServices

ROWS = [  # (anchor, positive, negatives): row 1 has one negative fewer (padded)
    ("a man plays a guitar", "a man plays music", ("the dog runs", "a cat sleeps")),
    ("two dogs run in the park", "dogs are running", ("a woman is cooking",)),
    ("the sun is hot", "it is a hot day", ("snow falls", "a bird sings")),
]


def _fake_tokenize(texts: list[str]) -> list[list[int]]:
    return [[5 + len(word) for word in text.split()] for text in texts]


def _tokenized() -> TokenizedTriplets:
    return TokenizedTriplets.build_ntuples([r[0] for r in ROWS], [r[1] for r in ROWS], [r[2] for r in ROWS], _fake_tokenize)


def test_collator_embeds_real_negatives_only_and_indexes_them() -> None:
    data = _tokenized()
    assert data.negatives_per_row == 2 and data.row_text_ids[1, 3] == -1
    assert data.lengths() == [max(len(t.split()) for t in (r[0], r[1], *r[2])) for r in ROWS]
    batch = TripletCollator(0, negatives_per_row=2)([data[i] for i in range(3)])
    assert batch["input_ids"].shape[0] == 3 + 3 + 5  # anchors, positives, 5 real negatives
    assert batch["negative_index"].tolist() == [[0, 1], [2, -1], [3, 4]]
    assert batch["text_ids"].shape == (11,)
    with pytest.raises(ValueError, match="pads to 1"):
        TripletCollator(0, negatives_per_row=1)([data[0]])


@pytest.fixture
def model(tiny_bert_dir: Path) -> Embedder:
    embedder = Embedder.from_pretrained(tiny_bert_dir, pooling="last_avg", device="cpu").double()
    embedder.train()
    return embedder


def _inputs(model: Embedder) -> dict[str, Tensor]:
    data = TokenizedTriplets.build_ntuples([r[0] for r in ROWS], [r[1] for r in ROWS], [r[2] for r in ROWS], model.tokenize_unpadded)
    return TripletCollator(model.tokenizer.pad_token_id, negatives_per_row=2)([data[i] for i in range(3)])


def test_triplet_task_loss_is_info_nce_over_every_real_negative(model: Embedder) -> None:
    model.eval()
    inputs = _inputs(model)
    vectors = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    objective = ContrastiveObjective.from_preset("simcse-sup", hard_negative_weight=2.0)
    _, out, size = TripletTask().loss_from_vectors(Services(), objective, vectors, inputs)
    assert size == 3
    # independent: each row's softmax over the 3 positives and the 5 real negatives, log(2) on its own
    anchors, positives, negatives = vectors[:3], vectors[3:6], vectors[6:]
    owner = [0, 0, 1, 2, 2]
    total = 0.0
    for i in range(3):
        logits = [torch.cosine_similarity(anchors[i], p, dim=0) / 0.05 for p in positives]
        logits += [
            torch.cosine_similarity(anchors[i], n, dim=0) / 0.05 + (torch.log(torch.tensor(2.0)) if owner[m] == i else 0) for m, n in enumerate(negatives)
        ]
        stacked = torch.stack([torch.as_tensor(v, dtype=torch.float64) for v in logits])
        total += float((torch.logsumexp(stacked, 0) - stacked[i]).detach())
    assert float(out.loss.detach()) == pytest.approx(total / 3, rel=1e-6)


def test_pair_task_expands_rows_and_ranks_within_them(model: Embedder) -> None:
    model.eval()
    inputs = _inputs(model)
    vectors = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).float()
    objective = AnglEObjective(ObjectiveConfig(positive_threshold=1.0))
    _, out, size = PairTask().loss_from_vectors(Services(), objective, vectors, inputs)
    anchors, positives, negatives = vectors[:3], vectors[3:6], vectors[6:]
    owner = torch.tensor([0, 0, 1, 2, 2])
    x = torch.cat([anchors, anchors[owner]])
    y = torch.cat([positives, negatives])
    labels = torch.tensor([1.0, 1, 1, 0, 0, 0, 0, 0])
    groups = torch.cat([torch.arange(3), owner])
    want = objective(x, y, labels, inputs["text_ids"][torch.cat([torch.arange(3), owner])], inputs["text_ids"][3:], groups)
    assert size == 3
    for name in ("cosine", "ibn", "angle"):
        assert float(out.components[name].detach()) == pytest.approx(float(want.components[name].detach()), rel=1e-6)


def _grads(model: nn.Module) -> dict[str, Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


CASES = [
    (TripletTask(), lambda: ContrastiveObjective.from_preset("simcse-sup")),
    (TripletTask(), lambda: MatryoshkaObjective(ContrastiveObjective.from_preset("simace-sup"), MatryoshkaConfig((32, 16)))),
    (PairTask(), lambda: AnglEObjective(ObjectiveConfig(positive_threshold=1.0))),
]


@pytest.mark.parametrize(("task", "make"), CASES, ids=["simcse-sup", "matryoshka-simace-sup", "paper"])
def test_gradcache_on_n_tuples_gives_the_full_batch_gradient(model: Embedder, task: Any, make: Any) -> None:
    objective, inputs, chunk = make(), _inputs(model), 4
    model.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    rows = task.model_inputs(inputs)
    n = rows["input_ids"].shape[0]
    parts = [model(**{k: v[s : s + chunk] for k, v in rows.items()}) for s in range(0, n, chunk)]
    _, out, _ = task.loss_from_vectors(Services(), objective, torch.cat(parts), inputs)
    out.loss.backward()
    loss, grads = out.loss.detach(), _grads(model)
    model.zero_grad(set_to_none=True)
    torch.manual_seed(3)
    _, cached, _ = gradcache_step(task, Services(), objective, model, inputs, chunk, backward=lambda value: value.backward())
    torch.testing.assert_close(cached.loss.detach(), loss)
    cached_grads = _grads(model)
    assert grads.keys() == cached_grads.keys() and grads
    for name in grads:
        torch.testing.assert_close(cached_grads[name], grads[name], rtol=1e-5, atol=1e-5, msg=name)


# ------------------------------------------------------------------ gather across processes

SIZES = (2, 1)
VALID = torch.tensor([[True, True], [True, False], [True, True]])


def _vectors() -> tuple[Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    return (
        torch.randn(3, 6, generator=g, dtype=torch.float64),
        torch.randn(3, 6, generator=g, dtype=torch.float64),
        torch.randn(3, 2, 6, generator=g, dtype=torch.float64),
    )


def _process_inputs(rows: range) -> tuple[dict[str, Tensor], Tensor]:
    """One process's n-tuple inputs (text ids: anchors 0-2, positives 10-12, negatives 20+) and vectors."""
    anchors, positives, negatives = _vectors()
    rows_list = list(rows)
    flat = [negatives[i, k] for i in rows_list for k in range(2) if VALID[i, k]]
    index = torch.full((len(rows_list), 2), -1, dtype=torch.long)
    ids = [i for i in rows_list] + [10 + i for i in rows_list]
    m = 0
    for r, i in enumerate(rows_list):
        for k in range(2):
            if VALID[i, k]:
                index[r, k] = m
                ids.append(20 + 2 * i + k)
                m += 1
    vectors = torch.cat([anchors[rows_list], positives[rows_list], torch.stack(flat)])
    n = vectors.shape[0]
    return {"input_ids": torch.zeros(n, 1, dtype=torch.long), "text_ids": torch.tensor(ids), "negative_index": index}, vectors


class _Gathering(Services):
    def gather(self, *tensors: Any) -> tuple[list[Any], int]:
        from anglekit.training.gather import gather_rows

        return gather_rows(*tensors)


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=len(SIZES))
    try:
        start = sum(SIZES[:rank])
        inputs, vectors = _process_inputs(range(start, start + SIZES[rank]))
        vectors.requires_grad_(True)
        _, out, size = TripletTask().loss_from_vectors(_Gathering(), ContrastiveObjective.from_preset("simcse-sup"), vectors, inputs)
        total = out.loss * size
        total.backward()
        torch.save({"total": total.detach(), "grad": vectors.grad}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_processes_see_every_negative_of_both_batches(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=len(SIZES), join=True)
    parts = [torch.load(tmp_path / f"rank{r}.pt") for r in range(len(SIZES))]
    inputs, vectors = _process_inputs(range(3))
    vectors.requires_grad_(True)
    _, out, _ = TripletTask().loss_from_vectors(Services(), ContrastiveObjective.from_preset("simcse-sup"), vectors, inputs)
    (out.loss * 3).backward()
    torch.testing.assert_close(sum(part["total"] for part in parts), (out.loss * 3).detach(), rtol=1e-5, atol=1e-6)
    # each process's rows (anchors, positives, real negatives) get the gradient of both losses
    local = [_process_inputs(range(sum(SIZES[:r]), sum(SIZES[: r + 1])))[0] for r in range(len(SIZES))]
    order = {int(t): j for j, t in enumerate(inputs["text_ids"])}
    for part, rows in zip(parts, local, strict=False):
        want = torch.stack([vectors.grad[order[int(t)]] for t in rows["text_ids"]])
        torch.testing.assert_close(part["grad"], want, rtol=1e-5, atol=1e-6)  # the task computes in float32


# ------------------------------------------------------------------ end to end


def _ntuple_file(path: Path, rows: int = 24, ragged: bool = False) -> Path:
    import random

    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            record = {"anchor": helpers.random_sentence(rng), "positive": helpers.random_sentence(rng), "positive_score": 0.9}
            for k in range(1, 4 if not (ragged and i % 3 == 0) else 3):
                record[f"negative_{k}"] = helpers.random_sentence(rng)
                record[f"negative_{k}_score"] = 0.1
            handle.write(json.dumps(record) + "\n")
    return path


def _config(model: Path, data: Path | None, out: Path, **settings: Any) -> TrainConfig:
    return train_config(model, data, out, **{"device": "cpu", "batch_size": 4, "max_steps": 2, "logging_steps": 1, "compact_embeddings": False, **settings})


def _losses(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]


def test_differing_negatives_without_padding_is_an_error_naming_the_row(tiny_bert_dir: Path, tmp_path: Path) -> None:
    data = _ntuple_file(tmp_path / "mined.jsonl", ragged=True)
    with pytest.raises(DataError, match=r"mined\.jsonl, row 2, field 'negative_3': row has 3 negative columns where the first row has 2.*--pad-negatives"):
        train(_config(tiny_bert_dir, data, tmp_path / "run", objective="simcse-sup"))


@pytest.mark.parametrize(
    "settings",
    [
        {"objective": "simcse-sup", "pad_negatives": True},
        {"objective": "simcse-sup", "pad_negatives": True, "max_batch_tokens": 40, "matryoshka_dims": [32, 16]},
        {"objective": "paper", "pad_negatives": True, "gradcache_chunk_size": 5},
        {"objective": "paper", "pad_negatives": True, "ese": True, "ese_compression_size": 16},
    ],
    ids=["simcse-sup", "token-budget-matryoshka", "paper-gradcache", "paper-ese"],
)
def test_training_on_padded_n_tuples(tiny_bert_dir: Path, tmp_path: Path, settings: dict) -> None:
    data = _ntuple_file(tmp_path / "mined.jsonl", ragged=True)
    out = tmp_path / "run"
    result = train(_config(tiny_bert_dir, data, out, **settings))
    assert result.steps == 2
    records = _losses(out)
    assert len(records) == 2 and all(r["loss"] == r["loss"] for r in records)
    saved = json.loads((out / "train_config.json").read_text())
    assert "up to 3 hard negatives, padded" in saved["train_data"]
    if settings["objective"] == "simcse-sup" and "max_batch_tokens" not in settings:
        # 4 rows x (1 positive + up to 3 negatives), every process's batch alone
        assert all(4 + 8 <= r["candidates"] <= 4 + 12 for r in records)
    if "matryoshka_dims" in settings:
        assert {"loss_simcse@32", "loss_simcse@16"} <= set(records[0])
    if settings["objective"] == "paper":
        assert {"loss_cosine", "loss_ibn", "loss_angle"} <= set(records[0])
    if settings.get("ese"):
        assert {"loss_ese_compressed", "loss_ese_compression"} <= set(records[0])


def test_pair_objectives_detect_tuple_sources(tmp_path: Path, pair_file: Path) -> None:
    from anglekit.data.training_data import tuple_columns, tuple_names

    assert tuple_columns(str(_ntuple_file(tmp_path / "mined.jsonl", rows=2)))
    assert not tuple_columns(str(pair_file))
    triplets = tmp_path / "t.csv"
    triplets.write_text("query,pos,neg\nq,p,n\n", encoding="utf-8")
    assert tuple_columns(str(triplets))
    assert not tuple_columns("stsb:train") and not tuple_columns(str(tmp_path / "missing.jsonl"))
    assert tuple_columns("whatever", {"anchor": "q", "positive": "d"}) and not tuple_columns("x", {"text1": "q"})
    assert tuple_names(["anchor", "negative_1"]) and not tuple_names(["text1", "anchor", "positive"])
    import pandas as pd

    pd.DataFrame({"anchor": ["q"], "positive": ["p"], "negative_1": ["n"]}).to_parquet(tmp_path / "t.parquet")
    assert tuple_columns(str(tmp_path / "t.parquet"))
    (tmp_path / "t.json").write_text(json.dumps([{"query": "q", "pos": "p"}]), encoding="utf-8")
    assert tuple_columns(str(tmp_path / "t.json"))
    (tmp_path / "p.json").write_text(json.dumps([{"text1": "q", "text2": "p", "label": 1}]), encoding="utf-8")
    assert not tuple_columns(str(tmp_path / "p.json"))


def test_pair_objective_trains_on_a_datasets_dataset_of_n_tuples(tiny_bert_dir: Path, tmp_path: Path) -> None:
    import datasets

    rows = [json.loads(line) for line in _ntuple_file(tmp_path / "mined.jsonl", rows=12).read_text().splitlines()]
    ds = datasets.Dataset.from_list(rows)
    result = train(_config(tiny_bert_dir, None, tmp_path / "run", objective="cosine"), train_dataset=ds)
    assert result.steps == 2
    assert "3 hard negatives" in json.loads((tmp_path / "run" / "train_config.json").read_text())["train_data"]


def test_rows_padded_down_to_no_negative_train_without_hard_negatives(model: Embedder) -> None:
    model.eval()
    data = TokenizedTriplets.build_ntuples([r[0] for r in ROWS], [r[1] for r in ROWS], [(), (), ()], model.tokenize_unpadded)
    inputs = TripletCollator(model.tokenizer.pad_token_id, negatives_per_row=0)([data[i] for i in range(3)])
    assert inputs["negative_index"].shape == (3, 0) and inputs["input_ids"].shape[0] == 6
    vectors = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
    objective = ContrastiveObjective.from_preset("simcse-sup")
    _, out, _ = TripletTask().loss_from_vectors(Services(), objective, vectors, inputs)
    want = info_nce_loss(vectors[:3].float(), vectors[3:].float())
    assert float(out.loss.detach()) == pytest.approx(float(want.detach()), rel=1e-6)


@pytest.mark.slow
def test_two_process_training_on_n_tuples_gathers_every_negative(tiny_bert_dir: Path, tmp_path: Path) -> None:
    """A real 2-process (gloo) run under torchrun: each anchor meets the 2 x 4 positives and the
    2 x 4 x 3 negatives of both processes (no padding here)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [
        str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "anglekit.cli", "train",
        "--model", str(tiny_bert_dir), "--train-data", str(_ntuple_file(tmp_path / "mined.jsonl", rows=32)), "--objective", "simcse-sup",
        "--batch-size", "4", "--max-steps", "2", "--logging-steps", "1", "--output-dir", str(out), "--device", "cpu", "--quiet",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=400, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["candidates"] for r in records if "loss" in r] == [8.0 + 24.0, 8.0 + 24.0]
