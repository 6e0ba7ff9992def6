"""benchmarks/bench_packed_layers.py: its batches are the protocol's length-grouped ones, and bad
flags are one clear error before any model loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import load_benchmark

bench = load_benchmark("bench_packed_layers")


def test_batches_are_the_protocols_length_grouped_pairs(tiny_bert_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    batches = bench.grouped_batches(tokenizer, 6, seed=0)
    assert len(batches) == 6
    for batch in batches:
        assert batch["input_ids"].shape[0] == 2 * bench.common.BATCH_SIZE  # both sides of 32 pairs
        assert batch["input_ids"].shape[1] <= bench.common.TRAIN_MAX_LENGTH
    # grouping by length: far less padding than the same texts in file order
    text1, text2, _ = bench.common.read_stsb("train")
    plain = [tokenizer([t for i in range(s, s + 32) for t in (text1[i], text2[i])], padding=True, return_tensors="pt") for s in range(0, 192, 32)]

    def padding(bs: list) -> float:
        return sum(b["attention_mask"].numel() for b in bs) / sum(int(b["attention_mask"].sum()) for b in bs)

    assert padding(batches) < padding(plain)
    assert batches[0]["input_ids"].tolist() == bench.grouped_batches(tokenizer, 1, seed=0)[0]["input_ids"].tolist()  # seeded


@pytest.mark.parametrize(("argv", "message"), [(["--batches", "0"], "--batches must be at least 1"), (["--rounds", "-1"], "--rounds must be at least 1"),
                                               (["--threads", "two"], "invalid int value")])  # fmt: skip
def test_bad_flags_are_one_clear_error(argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main([*argv, "--out", str(tmp_path / "out.json")])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
