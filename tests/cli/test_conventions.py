"""One convention for every command: MODEL first, --device/--dtype/--revision/--trust-remote-code
wherever a model is loaded, --quiet everywhere, --output a file and --output-dir a folder (old
spellings still work, with a note), clear errors for bad values, --version, python -m anglekit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anglekit.cli import COMMANDS, build_parser, main
from anglekit.errors import ConfigError, UnsupportedModelError
from anglekit.version import __version__

import helpers

_EVALUATION_TESTS = str(Path(__file__).resolve().parents[1] / "evaluation")  # tests/evaluation: the tiny data roots
if _EVALUATION_TESTS not in sys.path:
    sys.path.insert(0, _EVALUATION_TESTS)

from test_eval_sts import write_sts_root  # noqa: E402

SENTENCES = ["a man is playing the guitar .", "dog", "two kids ride bikes"]
LOADING_OPTIONS = ("--device", "--dtype", "--trust-remote-code", "--revision", "--quiet")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return helpers.run_cli(argv, capsys)


def _help(command: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = _run([*command, "--help"], capsys)
    assert code == 0
    return out


@pytest.fixture
def texts_file(tmp_path: Path) -> Path:
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


# ------------------------------------------------------------------ the same options everywhere


@pytest.mark.parametrize("command", ["eval", "encode", "merge", "merge-lora", "train", "generate"])
def test_commands_that_load_a_model_have_the_loading_options(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _help([command], capsys)
    for option in LOADING_OPTIONS:
        assert option in out, (command, option)


@pytest.mark.parametrize(
    "command",
    [["train"], ["eval"], ["report"], ["encode"], ["merge"], ["merge-lora"], ["plot-dynamics"], ["generate"],
     ["github-issues", "collect"], ["github-issues", "build"]],
)  # fmt: skip
def test_every_command_has_quiet(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert "--quiet" in _help(command, capsys)


@pytest.mark.parametrize("command", ["eval", "encode", "merge-lora", "train"])
def test_the_model_is_the_first_positional_argument(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _help([command], capsys)
    positionals = out.split("positional arguments:")[1].split("options:")[0].split()
    assert positionals[0] == "MODEL"


def test_every_command_module_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    out = _help([], capsys)
    for module in COMMANDS:
        assert module.NAME in out
        assert callable(module.add_parser) and callable(module.run)


def test_one_default_batch_size() -> None:
    from anglekit.model import DEFAULT_BATCH_SIZE

    parser = build_parser()
    assert parser.parse_args(["eval", "m", "--data", "x"]).batch_size == DEFAULT_BATCH_SIZE
    assert parser.parse_args(["encode", "m", "--input", "x", "--output", "y.npy"]).batch_size == DEFAULT_BATCH_SIZE


def test_output_is_a_file_and_output_dir_a_folder(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["eval"], ["merge"], ["merge-lora"], ["github-issues", "collect"], ["github-issues", "build"]):
        out = _help(command, capsys)
        assert "--output-dir DIR" in out, command
        assert "--out " not in out and "--out\n" not in out, command
    for command in (["eval"], ["encode"], ["report"], ["plot-dynamics"], ["generate"]):
        out = _help(command, capsys)
        assert "--output FILE" in out or "--output JSON" in out, command
        assert "--out " not in out and "--out\n" not in out, command


# ------------------------------------------------------------------ old spellings


@pytest.mark.parametrize(
    ("argv", "dest", "note"),
    [
        (["eval", "m", "--data", "x", "--out", "D"], "output_dir", "anglekit eval: note: --out is now --output-dir"),
        (["merge-lora", "a", "--output", "D"], "output_dir", "anglekit merge-lora: note: --output is now --output-dir"),
        (["generate", "--input", "i.txt", "--llm", "hf:x", "--out", "D"], "output", "anglekit generate: note: --out is now --output"),
        (["github-issues", "collect", "--out", "D"], "output_dir", "anglekit github-issues collect: note: --out is now --output-dir"),
        (["github-issues", "build", "c", "--out", "D"], "output_dir", "anglekit github-issues build: note: --out is now --output-dir"),
    ],
)  # fmt: skip
def test_old_output_flags_still_work_with_a_note(argv: list[str], dest: str, note: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(argv)
    assert str(getattr(args, dest)) == "D"
    err = capsys.readouterr().err
    assert err.strip() == note


def test_new_output_flags_print_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["merge-lora", "a", "--output-dir", "D"])
    assert args.output_dir == "D"
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["merge-lora", "a"], "--output-dir is required"),
        (["generate", "--input", "i.txt", "--llm", "hf:x"], "--output is required"),
        (["github-issues", "build", "c"], "--output-dir is required"),
        (["merge-lora", "a", "--output", "D", "--output-dir", "E"], "not allowed with"),
    ],
)
def test_output_flags_required_once(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and message in err, err


def test_eval_writes_suites_into_output_dir_and_scores_into_output(
    tiny_bert_dir: Path, dev_pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = write_sts_root(tmp_path / "data")
    common = ["--suite", "sts", "--data-root", str(root), "--no-cache", "--option", "sts.check_counts=false", "--quiet"]
    code, _, err = _run(["eval", str(tiny_bert_dir), "--data", str(dev_pair_file), "--output", "scores.json",
                         "--output-dir", "suites", *common], capsys)  # fmt: skip
    assert code == 0, err
    assert "note:" not in err
    assert json.loads((tmp_path / "scores.json").read_text())["datasets"]
    assert (tmp_path / "suites" / "sts.json").is_file() and (tmp_path / "suites" / "sts.md").is_file()
    assert not (tmp_path / "runs").exists()  # the default folder is not used

    code, _, err = _run(["eval", str(tiny_bert_dir), "--out", "old", *common], capsys)
    assert code == 0, err
    assert "anglekit eval: note: --out is now --output-dir" in err
    assert (tmp_path / "old" / "sts.json").is_file()

    # report: --output is a file; --quiet drops the "wrote" line, never the table
    code, out, err = _run(["report", "suites", "--output", "report.md"], capsys)
    assert code == 0 and "wrote report.md" in err and out.strip() == (tmp_path / "report.md").read_text().strip()
    code, out, err = _run(["report", "suites", "--output", "report2.md", "--quiet"], capsys)
    assert code == 0 and err == "" and out.strip() == (tmp_path / "report2.md").read_text().strip()


def test_train_old_progress_flags(capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    assert parser.parse_args(["train", "--no-progress"]).quiet is True
    assert "anglekit train: note: --no-progress is now --quiet" in capsys.readouterr().err
    assert parser.parse_args(["train", "--progress"]).quiet is False
    assert parser.parse_args(["train", "--quiet"]).quiet is True
    assert parser.parse_args(["train", "--model-dtype", "bf16"]).dtype == "bf16"  # an alias in the setting's metadata
    assert not hasattr(parser.parse_args(["train"]), "quiet")  # only given flags become overrides


# ------------------------------------------------------------------ train: MODEL or --model


def test_train_model_positional_or_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["train", "some-model"], ["train", "--model", "some-model"], ["train", "some-model", "--model", "some-model"]):
        code, _, err = _run([*argv, "--output-dir", str(tmp_path / "run")], capsys)
        assert code == 2, argv
        assert "missing required setting(s): train_data" in err, (argv, err)  # the model was taken
    code, _, err = _run(["train", "model-a", "--model", "model-b", "--train-data", "x.jsonl"], capsys)
    assert code == 2
    assert err.startswith("anglekit train: error:") and "model-a" in err and "model-b" in err and "twice" in err
    assert not (tmp_path / "run").exists()


def test_train_positional_model_overrides_the_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("model: from-yaml\n")
    code, _, err = _run(["train", "from-args", "--config", str(config)], capsys)
    assert code == 2 and "train_data" in err and "model" not in err.split("missing required setting(s):")[1]


def test_train_help_comes_from_the_settings_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.config import settings_of
    from anglekit.training.config import TrainConfig

    flat = " ".join(_help(["train"], capsys).split())
    for s in settings_of(TrainConfig):
        assert s.flags[0] in flat
        assert " ".join(s.help.split())[:40] in flat, s.key


# ------------------------------------------------------------------ version and python -m


def test_python_m_anglekit_version() -> None:
    result = subprocess.run([sys.executable, "-m", "anglekit", "--version"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"anglekit {__version__}"


@pytest.mark.parametrize("module", ["anglekit", "anglekit.cli"])
def test_python_m_help(module: str) -> None:
    result = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "usage: anglekit" in result.stdout and "merge-lora" in result.stdout


def test_command_help_does_not_import_torch() -> None:
    code = (
        "import sys\nfrom anglekit.cli import build_parser\nparser = build_parser()\n"
        "for argv in (['--help'], ['train', '--help'], ['eval', '--help'], ['encode', '--help'], ['report', '--help'],\n"
        "             ['merge', '--help'], ['merge-lora', '--help'], ['plot-dynamics', '--help'], ['generate', '--help'],\n"
        "             ['github-issues', 'collect', '--help'], ['github-issues', 'build', '--help']):\n"
        "    try:\n        parser.parse_args(argv)\n    except SystemExit:\n        pass\n"
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


# ------------------------------------------------------------------ bad values


@pytest.mark.parametrize(
    ("extra", "flag", "message"),
    [
        (["--device", "nonsense"], "--device", "expected cpu, cuda, cuda:N or mps, got 'nonsense'"),
        (["--device", "cuda:x"], "--device", "'cuda:x'"),
        (["--dtype", "fp8"], "--dtype", "invalid choice: 'fp8'"),
        (["--batch-size", "0"], "--batch-size", "expected a positive integer, got 0"),
        (["--batch-size", "many"], "--batch-size", "expected a positive integer, got 'many'"),
        (["--max-length", "-3"], "--max-length", "expected a positive integer, got -3"),
    ],
)
@pytest.mark.parametrize("command", ["eval", "encode"])
def test_bad_values_exit_2_with_a_clear_message(
    command: str, extra: list[str], flag: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "m", "--data", "x"] if command == "eval" else ["encode", "m", "--input", "x", "--output", str(tmp_path / "v.npy")]
    code, _, err = _run([*argv, *extra], capsys)
    assert code == 2
    assert f"argument {flag}: " in err and message in err, err
    assert not (tmp_path / "v.npy").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["merge-lora", "a", "--output-dir", "D", "--device", "gpu"],
        ["merge-lora", "a", "--output-dir", "D", "--dtype", "fp8"],
        ["generate", "--input", "i", "--output", "o.jsonl", "--llm", "hf:x", "--device", "gpu"],
        ["generate", "--input", "i", "--output", "o.jsonl", "--llm", "hf:x", "--dtype", "fp8"],
        ["generate", "--input", "i", "--output", "o.jsonl", "--llm", "hf:x", "--batch-size", "0"],
        ["train", "m", "--dtype", "fp8"],
    ],
)
def test_bad_values_of_other_commands_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(argv, capsys)
    assert code == 2 and "argument --" in err, err


def test_device_values_accepted() -> None:
    parser = build_parser()
    for device in ("cpu", "cuda", "cuda:1", "mps"):
        assert parser.parse_args(["encode", "m", "--input", "x", "--output", "v.npy", "--device", device]).device == device


# ------------------------------------------------------------------ model options reach the loader


def test_encode_device_cpu(tmp_path: Path, tiny_bert_dir: Path, texts_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.model.embedder import Embedder

    output = tmp_path / "v.npy"
    code, _, err = _run(["encode", str(tiny_bert_dir), "--input", str(texts_file), "--output", str(output),
                         "--device", "cpu", "--dtype", "fp32", "--quiet"], capsys)  # fmt: skip
    assert code == 0, err
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(SENTENCES)
    np.testing.assert_allclose(np.load(output), expected, rtol=0, atol=1e-5)


def test_model_options_become_from_pretrained_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, texts_file: Path) -> None:
    from anglekit.model.embedder import Embedder
    from anglekit.model.load_settings import LoadSettings

    seen: dict[str, Any] = {}

    def fake(cls: Any, name: str, settings: LoadSettings | None = None, **kwargs: Any) -> Any:
        seen.update(LoadSettings.of(settings, **kwargs).given(), name=name)  # the settings that differ from the defaults
        raise ConfigError("stop here")

    monkeypatch.setattr(Embedder, "from_pretrained", classmethod(fake))
    argv = ["encode", "org/model", "--input", str(texts_file), "--output", str(tmp_path / "v.npy"), "--device", "cuda:1",
            "--dtype", "bf16", "--revision", "v2", "--trust-remote-code", "--gguf-file", "m.gguf", "--max-length", "8"]  # fmt: skip
    assert main(argv) == 2
    assert seen == {
        "name": "org/model", "device": "cuda:1", "dtype": "bf16", "revision": "v2", "trust_remote_code": True,
        "gguf_file": "m.gguf", "max_length": 8,
    }  # fmt: skip
    seen.clear()
    long_text = ["--long-text", "chunk-max", "--long-text-window", "64", "--long-text-stride", "16", "--long-text-max-chunks", "4"]
    assert main(["encode", "org/model", "--input", str(texts_file), "--output", str(tmp_path / "v.npy"), *long_text]) == 2
    assert (seen["long_text"], seen["long_text_window"], seen["long_text_stride"], seen["long_text_max_chunks"]) == ("chunk-max", 64, 16, 4)
    seen.clear()
    assert main(["merge-lora", "org/adapters", "--output-dir", str(tmp_path / "m"), "--revision", "v3"]) == 2
    assert seen["device"] == "cpu" and seen["revision"] == "v3" and "trust_remote_code" not in seen  # False, the default
    assert "base_model" not in seen  # None: the one the adapters record
    seen.clear()
    assert main(["merge-lora", "org/adapters", "--output-dir", str(tmp_path / "m"), "--base-model", "org/base", "--device", "cuda"]) == 2
    assert seen["base_model"] == "org/base" and seen["device"] == "cuda"


# ------------------------------------------------------------------ eval's sentence-transformers fallback


class _StubEncoder:
    """Stands in for a sentence-transformers model: callable on a list of texts."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts: list[str], **_: Any) -> np.ndarray:
        self.calls += 1
        return np.stack([[len(t), t.count(" ") + 1.0, 1.0] for t in texts]).astype(np.float32)


@pytest.mark.parametrize(
    ("error", "backend", "falls_back"),
    [
        (UnsupportedModelError("module 'X' cannot be applied"), "auto", True),
        (UnsupportedModelError("module 'X' cannot be applied"), "anglekit", False),
        (ConfigError("this option is not supported"), "auto", False),  # the text alone no longer decides
    ],
)
def test_eval_falls_back_on_unsupported_model_error_only(
    error: Exception,
    backend: str,
    falls_back: bool,
    dev_pair_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import anglekit.cli.eval as eval_command
    from anglekit.model.embedder import Embedder

    def refuse(cls: Any, name: str, **kwargs: Any) -> Any:
        raise error

    stub = _StubEncoder()
    monkeypatch.setattr(Embedder, "from_pretrained", classmethod(refuse))
    monkeypatch.setattr(eval_command, "_sentence_transformer", lambda args: stub)
    code, out, err = _run(["eval", "some/model", "--data", str(dev_pair_file), "--backend", backend, "--quiet"], capsys)
    if falls_back:
        assert code == 0, err
        assert stub.calls > 0 and str(dev_pair_file) in out
    else:
        assert code == 2 and str(error) in err and stub.calls == 0


def test_eval_falls_back_to_sentence_transformers_for_a_dense_module(
    tiny_bert_dir: Path, dev_pair_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    from anglekit.data.catalog import resolve_dataset
    from anglekit.metrics.similarity import evaluate_pairs
    from anglekit.model.embedder import Embedder

    folder = tmp_path / "st-dense"
    modules = [Transformer(str(tiny_bert_dir), max_seq_length=32), Pooling(32, pooling_mode="mean"), Dense(32, 16)]
    st.SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    with pytest.raises(UnsupportedModelError, match="Dense"):
        Embedder.from_pretrained(folder, device="cpu")

    output = tmp_path / "scores.json"
    code, _, err = _run(["eval", str(folder), "--data", str(dev_pair_file), "--output", str(output), "--device", "cpu", "--quiet"], capsys)
    assert code == 0, err
    got = json.loads(output.read_text())["datasets"][str(dev_pair_file)]
    model = st.SentenceTransformer(str(folder), device="cpu")
    data = resolve_dataset(str(dev_pair_file))
    expected = evaluate_pairs(lambda texts: model.encode(list(texts)), data.text1, data.text2, data.labels)
    assert got["spearman"] == pytest.approx(expected.spearman, abs=1e-3)

    code, _, err = _run(["eval", str(folder), "--data", str(dev_pair_file), "--backend", "anglekit", "--quiet"], capsys)
    assert code == 2 and "Dense" in err


@pytest.mark.parametrize("command", ["train", "adapt"])
def test_model_given_as_positional_and_as_a_different_flag_is_refused(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    assert main([command, "model-a", "--model", "model-b"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the model is given twice, as MODEL 'model-a' and as --model 'model-b'" in err
