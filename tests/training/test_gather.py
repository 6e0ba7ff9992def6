"""Cross-process gather of contrastive candidates: two real gloo processes against one process
holding the whole batch (loss and gradients), with unequal batch sizes and a duplicate text
across processes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from anglekit.losses import ContrastiveObjective
from anglekit.training.gather import distributed_world, gather_rows

import helpers

SIZES = (3, 2)
IDS = torch.tensor([0, 1, 2, 3, 1])  # text 1 sits on both processes: masked as a false negative


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(5, 8, generator=generator, dtype=torch.float64), torch.randn(5, 8, generator=generator, dtype=torch.float64)


def _objective(preset: str) -> ContrastiveObjective:
    return ContrastiveObjective.from_preset(preset)


def _worker(rank: int, preset: str, init_file: str, out_dir: str) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=len(SIZES))
    try:
        anchors, positives = _batch()
        start = sum(SIZES[:rank])
        rows = slice(start, start + SIZES[rank])
        a = anchors[rows].clone().requires_grad_(True)
        p = positives[rows].clone().requires_grad_(True)
        with pytest.raises(ValueError, match="same number of rows"):
            gather_rows(p, IDS[:1])  # refused before any collective, on every process alike
        (every_p, every_id), offset = gather_rows(p, IDS[rows])
        assert offset == start and every_p.shape[0] == every_id.shape[0] == 5
        out = _objective(preset)(a, every_p, anchor_ids=IDS[rows], positive_ids=every_id, offset=offset)
        total = out.loss * SIZES[rank]  # this process's share of the full batch's summed loss
        total.backward()
        torch.save({"total": total.detach(), "a": a.grad, "p": p.grad}, Path(out_dir) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("preset", ["simcse-unsup", "simace-unsup"])
def test_two_processes_match_one_process_with_the_whole_batch(preset: str, tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_worker, args=(preset, str(tmp_path / "init"), str(tmp_path)), nprocs=len(SIZES), join=True)
    parts = [torch.load(tmp_path / f"rank{r}.pt") for r in range(len(SIZES))]

    anchors, positives = _batch()
    anchors.requires_grad_(True)
    positives.requires_grad_(True)
    full = _objective(preset)(anchors, positives, anchor_ids=IDS, positive_ids=IDS).loss * len(IDS)
    full.backward()

    torch.testing.assert_close(sum(part["total"] for part in parts), full.detach())
    torch.testing.assert_close(torch.cat([part["a"] for part in parts]), anchors.grad)
    # Each process's positives get the gradient of every process's loss (they are the others' negatives).
    torch.testing.assert_close(torch.cat([part["p"] for part in parts]), positives.grad)


def test_without_a_process_group_gather_is_the_identity() -> None:
    assert distributed_world() == (0, 1)
    tensor = torch.randn(3, 4, requires_grad=True)
    (gathered,), offset = gather_rows(tensor)
    assert gathered is tensor and offset == 0


def _sentences(path: Path) -> Path:
    import random

    rng = random.Random(0)
    path.write_text("".join(helpers.random_sentence(rng) + "\n" for _ in range(40)), encoding="utf-8")
    return path


@pytest.mark.parametrize(("gather", "expected"), [(True, 8.0), (False, 4.0)])
def test_two_process_training_gathers_candidates(gather: bool, expected: float, tiny_bert_dir: Path, tmp_path: Path) -> None:
    """A real 2-process (gloo) run of `anglekit train` under torchrun: with gathering each anchor
    meets the 2 x 4 positives of both processes, without it its own 4; one model is written."""
    import json
    import os
    import subprocess
    import sys

    out = tmp_path / "run"
    torchrun = Path(sys.executable).with_name("torchrun")
    command = [
        str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "anglekit.cli", "train",
        "--model", str(tiny_bert_dir), "--train-data", str(_sentences(tmp_path / "s.txt")), "--objective", "simcse-unsup",
        "--batch-size", "4", "--max-steps", "2", "--logging-steps", "1", "--output-dir", str(out), "--device", "cpu",
        "--quiet", "--gather-candidates" if gather else "--no-gather-candidates",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["candidates"] for r in records if "loss" in r] == [expected, expected]
    assert json.loads((out / "results.json").read_text())["steps"] == 2
    assert (out / "model" / "anglekit_config.json").is_file()
