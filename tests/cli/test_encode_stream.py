"""``anglekit encode --output-dir``: streaming shards on the command line; kill -9 then resume gives
the bytes of an uninterrupted run, without recomputing finished shards."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import helpers

SLOW = """
import os, sys, time
from pathlib import Path
from anglekit.model.embedder import Embedder
hold_at = int(os.environ.get("SLOW_ENCODE_HOLD_AT", "0"))  # hold in the N-th encode call (1-based) until killed
calls = 0
original = Embedder.encode
def held(self, *args, **kwargs):
    global calls
    calls += 1
    if calls == hold_at:
        Path(os.environ["SLOW_ENCODE_HOLD_FILE"]).write_text(str(calls))
        while True:
            time.sleep(1)
    return original(self, *args, **kwargs)
Embedder.encode = held
from anglekit.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _corpus(path: Path, n: int) -> list[str]:
    rng = random.Random(11)
    texts = [helpers.random_sentence(rng) for _ in range(n)]
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return texts


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_shards_from_the_command_line(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.corpus import open_shards
    from anglekit.model.embedder import Embedder

    texts = _corpus(tmp_path / "c.txt", 11)
    argv = ["encode", str(tiny_bert_dir), "--input", str(tmp_path / "c.txt"), "--output-dir", str(tmp_path / "out"), "--shard-size", "4", "--quiet"]
    code, out, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    assert "11 texts in 3 shards of 32-d vectors" in out and "3 encoded now, 0 already done" in out
    ids, vectors = open_shards(tmp_path / "out").load()
    np.testing.assert_allclose(vectors, Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(texts), atol=1e-5, rtol=0)
    code, out, err = helpers.run_cli(argv, capsys)
    assert code == 0 and "0 encoded now, 3 already done" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--output", "v.npy", "--shard-size", "4"], "--shard-size apply to --output-dir"),
        (["--output-dir", "d", "--shard-id", "2", "--num-shards", "2"], "--shard-id 2 must be below --num-shards 2"),
        (["--output", "v.npy", "--output-dir", "d"], "not allowed with argument"),
        (["--output-dir", "d", "--workers", "0"], "expected a positive integer"),
        (["--output-dir", "d", "--shard-id", "-1"], "must be >= 0"),
    ],
)
def test_bad_shard_options_exit_2_and_write_nothing(
    tmp_path: Path, tiny_bert_dir: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path / "c.txt", 3)
    code, _, err = helpers.run_cli(["encode", str(tiny_bert_dir), "--input", "c.txt", *extra, "--quiet"], capsys)
    assert code == 2 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_bad_corpus_names_the_row(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "dog"}\n{"id": "b", "text": ""}\n')
    code, _, err = helpers.run_cli(["encode", str(tiny_bert_dir), "--input", str(corpus), "--output-dir", str(tmp_path / "out"), "--quiet"], capsys)
    assert code == 1 and err.startswith("anglekit encode: error:") and f"{corpus}, row 2, field 'text': text is empty" in err


def test_kill_9_then_resume_gives_the_bytes_of_an_uninterrupted_run(tmp_path: Path, tiny_bert_dir: Path) -> None:
    _corpus(tmp_path / "c.txt", 60)
    script = tmp_path / "slow_encode.py"
    script.write_text(SLOW)

    def command(out: Path) -> list[str]:
        return [sys.executable, str(script), "encode", str(tiny_bert_dir), "--input", str(tmp_path / "c.txt"), "--output-dir", str(out),
                "--shard-size", "4", "--batch-size", "3", "--device", "cpu", "--quiet"]  # fmt: skip

    reference = subprocess.run(command(tmp_path / "ref"), capture_output=True, text=True, timeout=600)
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "out"
    rng = random.Random(5)

    def arm(attempt: int | None) -> helpers.Hold | None:
        """Held in the N-th encode call of the run; the first run after 3 shards (so some are done),
        the others at random among the next few (each run has at least 6 shards left)."""
        if attempt is None:
            return None
        marker = tmp_path / f"held-{attempt}"
        at = 4 if attempt == 0 else rng.randint(1, 3)
        return helpers.Hold(helpers.held_file(marker), {"SLOW_ENCODE_HOLD_AT": str(at), "SLOW_ENCODE_HOLD_FILE": str(marker)}, point=at)

    (first,) = helpers.kill_when_held(command(out), kills=1, arm=arm, finish=False)
    assert first["killed"] and first["returncode"] == -signal.SIGKILL, first
    finished = {p.name: p.stat().st_mtime_ns for p in out.glob("shard-*") if (out / (p.name.split(".")[0] + ".json")).is_file()}
    assert finished and len(finished) < 45  # some shards done, not all (15 shards x 3 files)

    # Then killed at random points, then a run to the end.
    runs = helpers.kill_when_held(command(out), kills=2, arm=lambda attempt: None if attempt is None else arm(attempt + 1))
    assert all(r["killed"] for r in runs[:-1]), runs
    final = runs[-1]
    assert final["returncode"] == 0, final["stderr"]
    assert _files(out) == _files(tmp_path / "ref")  # every shard, record and the manifest: the same bytes, nothing else
    for name, mtime in finished.items():
        assert (out / name).stat().st_mtime_ns == mtime, f"{name} was recomputed"
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["rows"], manifest["shards"]) == (60, 15)


def _zero_model(tiny_bert_dir: Path, folder: Path) -> Path:
    """The tiny BERT with its last LayerNorm zeroed: every token state, so every embedding, is all zeros."""
    import torch

    from anglekit.model.embedder import Embedder

    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    norm = model.backbone.encoder.layer[-1].output.LayerNorm
    with torch.no_grad():
        norm.weight.zero_()
        norm.bias.zero_()
    model.save_pretrained(folder)
    return folder


def test_normalize_warns_about_zero_vectors_with_their_rows(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str], caplog) -> None:
    zero = _zero_model(tiny_bert_dir, tmp_path / "zero")
    _corpus(tmp_path / "c.txt", 7)
    code, out, err = helpers.run_cli(
        ["encode", str(zero), "--input", str(tmp_path / "c.txt"), "--output", str(tmp_path / "v.npy"), "--normalize", "--quiet"], capsys
    )
    assert code == 0 and "wrote 7 x 32 vectors" in out, err  # legal input: written, with a warning
    assert f"anglekit encode: warning: {tmp_path / 'c.txt'}: 7 of 7 vectors are all zeros (rows 1, 2, 3, 4, 5, ...)" in err, err
    assert not np.load(tmp_path / "v.npy").any()
    code, out, err = helpers.run_cli(
        ["encode", str(tiny_bert_dir), "--input", str(tmp_path / "c.txt"), "--output", str(tmp_path / "w.npy"), "--normalize"], capsys
    )
    assert code == 0 and "all zeros" not in err
    with caplog.at_level("WARNING", logger="anglekit.corpus.encode"):
        argv = ["encode", str(zero), "--input", str(tmp_path / "c.txt"), "--output-dir", str(tmp_path / "out"), "--shard-size", "4", "--normalize", "--quiet"]
        code, out, err = helpers.run_cli(argv, capsys)
    assert code == 0, err
    messages = [r.getMessage().split(": the model")[0] for r in caplog.records if "all zeros" in r.getMessage()]
    assert messages == [f"{tmp_path / 'c.txt'}: shard 0: 4 of 4 vectors are all zeros (rows 1, 2, 3, 4)",
                        f"{tmp_path / 'c.txt'}: shard 1: 3 of 3 vectors are all zeros (rows 5, 6, 7)"], messages  # fmt: skip


def test_zero_rows_message_names_the_first_rows_and_the_count() -> None:
    from anglekit.model.encoding import zero_rows_message

    vectors = np.ones((20, 4), dtype=np.float32)
    assert zero_rows_message(vectors) is None
    vectors[[2, 3, 7, 11, 12, 13, 19]] = 0
    vectors[5] = [0, 0, 0, 1e-30]  # tiny but not zero: it normalises to a unit vector
    message = zero_rows_message(vectors, first_row=101)
    assert message is not None and message.startswith("7 of 20 vectors are all zeros (rows 103, 104, 108, 112, 113, ...)")
