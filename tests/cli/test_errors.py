"""Bad input as a new user gives it: a clear one-line error (exit 2), never a traceback, and
nothing lost. One test per class of mistake across every command, and one per case found."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import helpers

SENTENCES = ["a man is playing the guitar .", "dog", "two kids ride bikes", "the old woman walks her dog ."]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


def _clean_error(code: int, err: str, *needles: str, status: int = 2) -> None:
    assert code == status, err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def blocker(tmp_path: Path) -> Path:
    """A regular file: any output path under it cannot be written, whoever runs the tests."""
    path = tmp_path / "a-file"
    path.write_text("x")
    return path


# ------------------------------------------------------------------ the classes


def _commands_with_outputs(model: str, texts: Path, pairs: Path, bad: Path) -> list[list[str]]:
    folder, file = str(bad / "out"), str(bad / "out.file")
    return [
        ["encode", model, "--input", str(texts), "--output", file + ".npy"],
        ["eval", model, "--data", str(pairs), "--output", file],
        ["eval", model, "--suite", "sts", "--output-dir", folder],
        ["train", model, "--train-data", str(pairs), "--output-dir", folder],
        ["merge-lora", model, "--output-dir", folder],
        ["merge", model, model, "--weight", "0.5", "--output-dir", folder],
        ["generate", "--input", str(texts), "--llm", "openai:m@http://127.0.0.1:9", "--output", file + ".jsonl"],
        ["github-issues", "collect", "--repos", "a/b", "--base-url", "http://127.0.0.1:9", "--output-dir", folder],
        ["github-issues", "build", str(texts.parent), "--output-dir", folder],
        ["plot-dynamics", str(texts.parent), "--output", file + ".png"],
        ["report", str(texts.parent), "--output", file + ".md"],
    ]


def test_every_command_refuses_an_unwritable_output_before_any_work(
    tiny_bert_dir: Path, texts: Path, pair_file: Path, blocker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in _commands_with_outputs(str(tiny_bert_dir), texts, pair_file, blocker):
        code, out, err = _run(argv, capsys)
        _clean_error(code, err, "cannot be written", str(blocker))
        assert out == "", argv  # nothing was computed, nothing printed as done
    assert blocker.read_text() == "x"


def test_a_folder_without_write_permission_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root writes anywhere, so the permission error is made at the boundary the check uses."""
    import tempfile

    from anglekit.errors import OutputError
    from anglekit.io.atomic import atomic_write_text, check_writable

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError, match="Permission denied"):
        check_writable(tmp_path / "out.npy")
    with pytest.raises(OutputError, match="Permission denied"):
        atomic_write_text(tmp_path / "out.txt", "x")
    assert not (tmp_path / "out.txt").exists()


def test_an_unexpected_error_is_one_line_and_a_saved_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, texts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import anglekit.cli.encode as encode

    def boom(args: Any) -> int:
        raise RuntimeError("something nobody expected")

    monkeypatch.setenv("ANGLEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(encode, "run", boom)
    code, _, err = _run(["encode", "m", "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 70 and len(err.strip().splitlines()) == 1, err
    assert "unexpected error: RuntimeError: something nobody expected" in err and "Traceback" not in err
    saved = next((tmp_path / "cache" / "logs").glob("anglekit-encode-*.txt"))
    assert saved.name in err and "RuntimeError: something nobody expected" in saved.read_text()
    code, _, err = _run(["--debug", "encode", "m", "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    assert code == 70 and "Traceback (most recent call last)" in err


def _numeric_flags() -> list[tuple[list[str], str, str]]:
    """(command, flag, an out-of-range value) for every numeric flag of every command."""
    from anglekit.cli import build_parser

    parser = build_parser()
    out = []
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in subparsers.choices.items():
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        pairs = [([name, inner], p) for a in nested for inner, p in a.choices.items()] if nested else [([name], sub)]
        for command, p in pairs:
            for action in p._actions:
                kind = getattr(action.type, "__name__", "")
                if action.option_strings and kind in ("int", "float", "positive_int") and action.help != "==SUPPRESS==":
                    out.append((command, action.option_strings[0], "-7"))
    return out


def test_every_numeric_flag_checks_its_range_when_parsed(capsys: pytest.CaptureFixture[str]) -> None:
    flags = _numeric_flags()
    assert len(flags) > 40  # train's settings, eval/encode, generate, github-issues
    unchecked = []
    for command, flag, value in flags:
        code, _, err = _run([*command, flag, value], capsys)
        if code != 2 or f"argument {flag}" not in err or ("must be" not in err and "positive" not in err):
            unchecked.append((command, flag, err.strip().splitlines()[-1:] if err else code))
    # These take any number, negatives included (a label value, a bound, "no limit" = -1 is in range).
    allowed = {"--positive-label", "--negative-label", "--positive-threshold"}
    assert [u for u in unchecked if u[1] not in allowed] == []


# ------------------------------------------------------------------ model folders


def test_max_length_above_the_position_embeddings(
    tiny_bert_dir: Path, texts: Path, tmp_path: Path, pair_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(texts), "--output", str(tmp_path / "v.npy"), "--max-length", "5000"], capsys)
    _clean_error(code, err, "max_length 5000", "128 position embeddings")
    code, _, err = _run(["train", str(tiny_bert_dir), "--train-data", str(pair_file), "--max-length", "5000",
                         "--output-dir", str(tmp_path / "run"), "--device", "cpu"], capsys)  # fmt: skip
    _clean_error(code, err, "128 position embeddings")
    assert not (tmp_path / "v.npy").exists() and not (tmp_path / "run" / "metrics.jsonl").exists()


def test_truncated_weights_are_refused_before_loading(
    tiny_bert_dir: Path, copy_model: Any, texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = copy_model(tiny_bert_dir)
    weights = model / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    code, _, err = _run(["encode", str(model), "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    _clean_error(code, err, "model.safetensors: truncated", f"{len(data) // 2} of {len(data)} bytes")
    weights.write_bytes(b"\x05")
    code, _, err = _run(["encode", str(model), "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    _clean_error(code, err, "not a readable safetensors file")


def test_a_model_folder_without_tokenizer_files_is_refused(
    tiny_bert_dir: Path, copy_model: Any, texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = copy_model(tiny_bert_dir)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (model / name).unlink(missing_ok=True)
    code, _, err = _run(["encode", str(model), "--input", str(texts), "--output", str(tmp_path / "v.npy")], capsys)
    _clean_error(code, err, "no tokenizer files")
    assert not (tmp_path / "v.npy").exists()


def test_an_odd_hidden_size_with_the_angle_term_fails_before_any_data(
    tiny_bert_dir: Path, copy_model: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = copy_model(tiny_bert_dir)
    config = json.loads((model / "config.json").read_text())
    config.update(hidden_size=33, num_attention_heads=3)
    (model / "config.json").write_text(json.dumps(config))
    argv = ["train", str(model), "--train-data", str(tmp_path / "not-read-yet.jsonl"), "--output-dir", str(tmp_path / "run"), "--device", "cpu"]
    code, _, err = _run(argv, capsys)
    _clean_error(code, err, "hidden size must be even", "33")
    assert not (tmp_path / "run").exists()
    code, _, err = _run([*argv, "--objective", "cosine"], capsys)  # no angle term: gets as far as the data
    _clean_error(code, err, "not-read-yet.jsonl")


# ------------------------------------------------------------------ training runs


def _train(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["train", str(model), "--train-data", str(data), "--output-dir", str(out), "--max-steps", "2", "--batch-size", "4",
            "--positive-threshold", "4.0", "--device", "cpu", "--precision", "fp32", "--quiet", *extra]  # fmt: skip


def test_resume_of_a_finished_run_changes_nothing(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert _run(_train(tiny_bert_dir, pair_file, out), capsys)[0] == 0
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    code, stdout, err = _run(_train(tiny_bert_dir, pair_file, out, "--resume"), capsys)
    assert code == 0, err
    assert "already complete" in stdout and "nothing was changed" in stdout
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()} == before


def test_a_finished_run_moved_elsewhere_names_its_new_folder(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    old = tmp_path / "old"
    assert _run(_train(tiny_bert_dir, pair_file, old), capsys)[0] == 0
    new = tmp_path / "moved"
    old.rename(new)
    code, stdout, err = _run(_train(tiny_bert_dir, pair_file, new, "--resume"), capsys)
    assert code == 0, err
    assert f"the run in {new} is already complete" in stdout and str(old) not in stdout
    argv = {"model": str(tiny_bert_dir), "train_data": str(pair_file), "output_dir": str(new), "max_steps": 2, "batch_size": 4, "positive_threshold": 4.0,
            "device": "cpu", "precision": "fp32", "quiet": True, "resume": True}  # fmt: skip
    result = train(TrainConfig.from_dict(argv))
    assert result.already_complete and result.model_dir == new / "model" and result.output_dir == new and (new / "model").is_dir()


def test_resume_and_overwrite_together_are_refused(tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(_train(tiny_bert_dir, pair_file, tmp_path / "run", "--resume", "--overwrite-output-dir"), capsys)
    _clean_error(code, err, "contradict")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: cuda is a valid device")
def test_device_cuda_without_a_gpu_is_an_error_not_a_silent_cpu_run(
    tiny_bert_dir: Path, pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _train(tiny_bert_dir, pair_file, tmp_path / "run")
    argv[argv.index("--device") + 1] = "cuda"
    code, _, err = _run(argv, capsys)
    _clean_error(code, err, "no CUDA GPU", "--device auto")
    assert not (tmp_path / "run").exists()
    argv[argv.index("--device") + 1] = "auto"
    assert _run(argv, capsys)[0] == 0


def test_unsupervised_throughput_names_sentences(tiny_bert_dir: Path, texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", str(tiny_bert_dir), "--objective", "simcse-unsup", "--train-data", str(texts), "--output-dir", str(tmp_path / "run"),
            "--max-steps", "1", "--batch-size", "4", "--device", "cpu", "--quiet"]  # fmt: skip
    code, out, err = _run(argv, capsys)
    assert code == 0, err
    assert "sentences/s" in out and "pairs/s" not in out and f"{torch.get_num_threads()} CPU threads" in out
    assert json.loads((tmp_path / "run" / "results.json").read_text())["unit"] == "sentences"


# ------------------------------------------------------------------ evaluation data


def test_eval_on_one_pair_and_on_constant_labels(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"text1": "a dog", "text2": "a cat", "label": 1.0}) + "\n")
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", str(one)], capsys)
    _clean_error(code, err, "at least 2 pairs, got 1", status=1)
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps({"text1": f"a dog {i}", "text2": "a cat", "label": 3.0}) + "\n" for i in range(4)))
    code, out, err = _run(["eval", str(tiny_bert_dir), "--data", str(same)], capsys)
    _clean_error(code, err, "undefined", "all 4 gold labels equal 3", status=1)
    assert "nan" not in out.lower()


def test_a_typo_of_a_known_dataset_name_is_pointed_out(tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", "stsbb:test"], capsys)
    _clean_error(code, err, "did you mean 'stsb'")


def test_inputs_of_the_wrong_shape(tiny_bert_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "v.npy"
    obj = tmp_path / "obj.json"
    obj.write_text('{"text": "one", "label": 1}')
    folder = tmp_path / "folder"
    folder.mkdir()
    for source, needle, status in ((obj, "not a list of records", 1), (folder, "is a folder, not a file", 2)):
        code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(source), "--output", str(out)], capsys)
        _clean_error(code, err, needle, status=status)
    mac = tmp_path / "mac.txt"
    mac.write_bytes(b"first line\rsecond line\rthird line\r")
    assert _run(["encode", str(tiny_bert_dir), "--input", str(mac), "--output", str(out), "--quiet"], capsys)[0] == 0
    assert np.load(out).shape[0] == 3  # three texts, not one holding carriage returns


def test_encode_none_names_the_argument(tiny_bert_dir: Path) -> None:
    from anglekit.model.embedder import Embedder

    model = Embedder.from_pretrained(tiny_bert_dir, device="cpu")
    for bad in (None, 3, b"bytes", {"a": "b"}):
        with pytest.raises(TypeError, match="texts must be a string or a sequence of strings"):
            model.encode(bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ generate and github-issues


def test_generate_with_a_missing_local_model(tmp_path: Path, texts: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["generate", "--input", str(texts), "--llm", "hf:/path/that/does/not/exist", "--output", str(tmp_path / "p.jsonl")], capsys)
    _clean_error(code, err, "no model folder or file at /path/that/does/not/exist")


def test_github_collect_failures_name_the_host_even_when_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["github-issues", "collect", "--repos", "a/b", "--base-url", "http://127.0.0.1:9", "--max-retries", "0",
                           "--quiet", "--output-dir", str(tmp_path / "c")], capsys)  # fmt: skip
    assert code == 3 and "1 failed" in out
    assert "a/b failed" in err and "127.0.0.1:9" in err and "refused" in err.lower()


def test_per_page_above_the_api_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["github-issues", "collect", "--per-page", "500", "--output-dir", str(tmp_path / "c")], capsys)
    _clean_error(code, err, "--per-page: must be <= 100, got 500")


# ------------------------------------------------------------------ files others read


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    from anglekit.io.atomic import atomic_write_json

    old = os.umask(umask)
    try:
        atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == mode


def test_setup_stamp_records_every_extra_installed() -> None:
    """After the test set-up (all extras), the quick start's set-up (data) has nothing to install."""
    repo = Path(__file__).resolve().parents[2]
    stamp = repo / ".venv" / ".anglekit-setup"
    import hashlib

    digest = hashlib.sha256((repo / "pyproject.toml").read_bytes() + (repo / "scripts" / "setup.sh").read_bytes()).hexdigest()[:16]
    lines = stamp.read_text().split() if stamp.is_file() else []
    if not lines or lines[0] != digest or "all" not in lines[1:]:
        pytest.skip("the tests were not set up by scripts/test.sh with this pyproject (no current stamp with 'all')")
    before = stamp.read_text()
    if shutil.which("bash") is None:  # pragma: no cover
        pytest.skip("no bash")
    import subprocess

    done = subprocess.run(["bash", "scripts/setup.sh", "data"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "" and stamp.read_text() == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_encode_on_a_missing_accelerator_is_a_clear_error(tiny_bert_dir: Path, texts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for device in ("cuda", "cuda:1", "mps"):
        code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(texts), "--output", str(tmp_path / "v.npy"), "--device", device], capsys)
        _clean_error(code, err, f"device '{device}'")
