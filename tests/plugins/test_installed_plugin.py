"""A plugin that installs: tests/fixtures/anglekit_demo_plugin is pip-installed (with anglekit
itself, from this checkout) into a fresh virtual environment, and the ``anglekit`` command there
lists its objective, backend, export format and evaluation suite in ``--help`` and uses each.

Nothing is downloaded: the fresh environment sees the test environment's packages (torch,
transformers, setuptools, pip) through a ``.pth`` file, and pip runs with ``--no-index
--no-deps --no-build-isolation``. Slow (a minute or two: four commands load torch)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "anglekit_demo_plugin"
TEXTS = ["a man is playing the guitar .", "dog", "two kids ride bikes in the park every morning"]


def _copy(source: Path, target: Path) -> Path:
    """A copy to build from (a build writes build/ and *.egg-info next to its sources)."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    return target


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with anglekit (this checkout) and the demo plugin installed."""
    root = tmp_path_factory.mktemp("plugin-venv")
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    python = env / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True, timeout=120).stdout.strip()  # fmt: skip
    # This environment's packages, as plain path entries (their own .pth files, such as an editable
    # anglekit's, are not read: the fresh environment's anglekit is the one installed below).
    Path(purelib, "test_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    source = root / "anglekit-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    _copy(REPO / "src", source / "src")
    plugin = _copy(FIXTURE, root / "plugin")
    command = [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation", "--no-cache-dir",
               "--disable-pip-version-check", str(source), str(plugin)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_environment())
    assert done.returncode == 0, done.stdout + done.stderr
    return env


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", ANGLEKIT_AUTO_BF16="0")
    return env


def anglekit(venv: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "anglekit"), *args], capture_output=True, text=True, timeout=600, env=_environment(), cwd=cwd)


def test_the_fresh_environment_runs_the_installed_copies_with_their_data(venv: Path) -> None:
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import anglekit, anglekit_demo_plugin; print(anglekit.__file__); print(anglekit_demo_plugin.__file__)"],
                          capture_output=True, text=True, timeout=120, env=_environment())  # fmt: skip
    assert done.returncode == 0, done.stderr
    for path in done.stdout.split():
        assert Path(path).is_relative_to(venv), path
    installed = Path(done.stdout.split()[0]).parent  # the package data came along (the server's page)
    for name in ("index.html", "app.js", "style.css"):
        assert (installed / "serve" / "ui" / name).read_bytes() == (REPO / "src" / "anglekit" / "serve" / "ui" / name).read_bytes()


def test_help_lists_every_kind_of_plugin(venv: Path) -> None:
    done = anglekit(venv, "--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "installed plugins (docs/plugins.md):" in text
    for line in ("objectives: demo (anglekit-demo-plugin 0.1.0)", "backends: demo-scaled (anglekit-demo-plugin 0.1.0)",
                 "export formats: demo-npy (anglekit-demo-plugin 0.1.0)", "eval suites: demo-probe (anglekit-demo-plugin 0.1.0)"):  # fmt: skip
        assert line in text
    helps = {command: " ".join(anglekit(venv, command, "--help").stdout.split()) for command in ("train", "encode", "export", "eval")}
    assert "--demo-scale FLOAT Demo objective: the scale of the cosine." in helps["train"]
    assert "demo-scaled" in helps["encode"].split("--backend")[1].split("--")[0]
    assert "demo-npy: demo plugin: the vector of one probe sentence as vectors.npy" in helps["export"]
    assert "--probe-sentence STR demo-npy: the sentence whose vector is written" in helps["export"]
    assert "geometry, demo-probe or all" in helps["eval"]
    assert not any("PluginWarning" in anglekit(venv, c, "--help").stderr for c in ("train", "export"))


def test_the_objective_trains(venv: Path, tiny_bert_dir: Path, pair_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = anglekit(venv, "train", str(tiny_bert_dir), "--train-data", str(pair_file), "--output-dir", str(out), "--objective", "demo-cos",
                    "--demo-scale", "3.5", "--max-steps", "2", "--batch-size", "4", "--logging-steps", "1", "--device", "cpu",
                    "--precision", "fp32", "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["objective"] == {"scale": 3.5} and saved["batch_kind"] == "pairs" and saved["train"]["demo_scale"] == 3.5
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss_demo" in record for record in logged)
    assert json.loads((out / "results.json").read_text())["steps"] == 2


def test_the_backend_encodes_a_folder_it_claims(venv: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder

    folder = tmp_path / "scaled"
    folder.mkdir()
    (folder / "demo_scaled.json").write_text(json.dumps({"model": str(tiny_bert_dir), "scale": 3.0}))
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS) + "\n")
    reference = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(TEXTS, normalize=False)
    for backend in ("demo-scaled", "auto"):  # named, or found by its marker file
        output = tmp_path / f"{backend}.npy"
        done = anglekit(venv, "encode", str(folder), "--backend", backend, "--input", str(texts), "--output", str(output), "--device", "cpu", "--quiet")
        assert done.returncode == 0, done.stderr
        np.testing.assert_allclose(np.load(output), 3.0 * reference, rtol=1e-5, atol=1e-5)


def test_the_export_format_writes_its_folder(venv: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder

    out = tmp_path / "probe"
    sentence = "two kids ride their bikes ."
    done = anglekit(venv, "export", str(tiny_bert_dir), "--format", "demo-npy", "--probe-sentence", sentence, "--output-dir", str(out))
    assert done.returncode == 0, done.stderr
    assert "(demo-npy; checked with numpy: max difference" in done.stdout
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode([sentence])
    np.testing.assert_allclose(np.load(out / "vectors.npy"), expected, rtol=0, atol=1e-6)
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8")) == {"sentence": sentence, "dim": 32}


def test_the_suite_runs(venv: Path, tiny_bert_dir: Path, tmp_path: Path) -> None:
    from anglekit.model.embedder import Embedder

    sentence = "two dogs run in the park ."
    out = tmp_path / "eval"
    done = anglekit(venv, "eval", str(tiny_bert_dir), "--suite", "demo-probe", "--option", f"demo-probe.sentence={sentence}", "--data-root", str(tmp_path),
                    "--output-dir", str(out), "--no-cache", "--device", "cpu", "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "demo-probe.json").read_text(encoding="utf-8"))
    vectors = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode([sentence, sentence.upper()]).astype(np.float64)
    cosine = float(vectors[0] @ vectors[1] / np.prod(np.linalg.norm(vectors, axis=1)))
    assert result["scores"]["cosine"] == pytest.approx(cosine, abs=1e-5) and result["options"] == {"sentence": sentence}
    assert "## Demo probe" in done.stdout


def test_a_plugin_cannot_take_a_built_in_name(venv: Path, tmp_path: Path) -> None:
    """A second distribution declaring a backend named 'torch' is left out with a warning; the command runs."""
    dist = tmp_path / "site" / "clash-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: clash\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[anglekit.backends]\ntorch = anglekit_demo_plugin.backend:BACKEND\n")
    env = {**_environment(), "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run([str(venv / "bin" / "anglekit"), "encode", "--help"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0
    assert "the backend plugin 'torch' (anglekit_demo_plugin.backend:BACKEND, from clash 0.1; entry point group anglekit.backends) is left out" in done.stderr
    assert "backend 'torch' is registered already" in done.stderr
    assert "demo-scaled" in done.stdout
