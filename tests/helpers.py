"""Builders of tiny offline test models and data, plus a slowed-down CLI for the kill/resume test.

Nothing here downloads anything: the models are random, built from configs, and saved with
``save_pretrained`` into directories the tests own.

Run as a script (``python tests/helpers.py slow-cli train ...``) it runs ``anglekit.cli.main`` with
every optimisation step slowed down by ``$ANGLEKIT_TEST_STEP_SLEEP`` seconds, so that a test can
reliably kill a training run in the middle (the tiny model would otherwise finish in a blink).
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

WORDS = [
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "if",
    "then",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "from",
    "up",
    "down",
    "out",
    "over",
    "under",
    "again",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "do",
    "does",
    "did",
    "will",
    "would",
    "can",
    "could",
    "should",
    "may",
    "might",
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "me",
    "him",
    "her",
    "us",
    "them",
    "my",
    "your",
    "his",
    "its",
    "our",
    "their",
    "this",
    "that",
    "these",
    "those",
    "man",
    "woman",
    "child",
    "dog",
    "cat",
    "bird",
    "horse",
    "car",
    "bus",
    "train",
    "plane",
    "boat",
    "bike",
    "house",
    "road",
    "street",
    "city",
    "park",
    "tree",
    "flower",
    "grass",
    "water",
    "river",
    "sea",
    "lake",
    "beach",
    "mountain",
    "sky",
    "sun",
    "rain",
    "snow",
    "food",
    "apple",
    "bread",
    "guitar",
    "piano",
    "music",
    "song",
    "book",
    "paper",
    "phone",
    "computer",
    "table",
    "chair",
    "door",
    "window",
    "ball",
    "game",
    "team",
    "play",
    "plays",
    "playing",
    "played",
    "run",
    "runs",
    "running",
    "ran",
    "walk",
    "walks",
    "walking",
    "eat",
    "eats",
    "eating",
    "sit",
    "sits",
    "sitting",
    "ride",
    "rides",
    "riding",
    "read",
    "reads",
    "reading",
    "cut",
    "cuts",
    "cutting",
    "cook",
    "cooks",
    "cooking",
    "talk",
    "talks",
    "big",
    "small",
    "red",
    "blue",
    "green",
    "black",
    "white",
    "young",
    "old",
    "happy",
    "sad",
    "fast",
    "slow",
    "new",
    "good",
    "bad",
    "hot",
    "cold",
    "one",
    "two",
    "three",
    "four",
    "five",
    "some",
    "many",
    "all",
    "no",
    "not",
    "very",
    "there",
    "here",
    "now",
    "today",
    "yesterday",
    "tomorrow",
    "people",
    "person",
    "group",
    "men",
    "women",
    "children",
    "dogs",
    "cats",
    "birds",
    "cars",
    "kids",
    "girl",
    "boy",
    "girls",
    "boys",
]

LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
PUNCT = list(".,!?;:'\"-()")


def vocabulary() -> list[str]:
    seen: dict[str, None] = {}
    for token in [*SPECIAL_TOKENS, *PUNCT, *LETTERS, *WORDS, *(f"##{c}" for c in LETTERS)]:
        seen.setdefault(token, None)
    return list(seen)


def words(n: int, offset: int = 0) -> str:
    """``n`` words of the tiny vocabulary, starting at word ``offset`` (wrapping around): a text of a known length."""
    vocab = [w for w in vocabulary() if w.isalpha()]
    return " ".join(vocab[(offset + i) % len(vocab)] for i in range(n))


def row_cosines(a: Any, b: Any) -> Any:
    """The cosine of each row of ``a`` with the same row of ``b`` (numpy arrays [N, D] -> [N])."""
    import numpy as np

    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def train_config(model: Path | str, train_data: Path | str | None, output_dir: Path | str, /, **settings: Any) -> Any:
    """A TrainConfig of ``model`` on ``train_data`` (left out when None) into ``output_dir``, quiet,
    with ``settings`` (flat keys) on top: the one builder the training tests share."""
    from anglekit.training.config import TrainConfig

    values: dict[str, Any] = {"model": str(model), "output_dir": str(output_dir), "quiet": True}
    if train_data is not None:
        values["train_data"] = str(train_data)
    return TrainConfig.from_dict({**values, **settings})


def build_tiny_bert(directory: Path, *, seed: int = 0, layers: int = 2) -> Path:
    """A random BERT of ``layers`` layers (default 2; hidden 32) with a WordPiece tokenizer, saved under ``directory``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    vocab_file = directory / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        pad_token_id=0,
    )
    model = BertModel(config)
    model.eval()
    model.save_pretrained(directory)
    import inspect

    # transformers 5 takes ``vocab`` (a path or a dict); 4.x takes ``vocab_file``.
    key = "vocab" if "vocab" in inspect.signature(BertTokenizerFast.__init__).parameters else "vocab_file"
    tokenizer = BertTokenizerFast(**{key: str(vocab_file)}, do_lower_case=True, model_max_length=128)
    tokenizer.save_pretrained(directory)
    return directory


def build_tiny_llama(directory: Path, *, seed: int = 0, layers: int = 2) -> Path:
    """A random Llama-style causal LM of ``layers`` layers (default 2) with a fast tokenizer that has NO pad token, left padding."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = [tok for tok in vocabulary() if tok != "[PAD]"] + ["<s>", "</s>"]
    token_to_id = {tok: i for i, tok in enumerate(vocab)}
    backend = Tokenizer(models.WordPiece(token_to_id, unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="[UNK]",
        padding_side="left",
        model_max_length=128,
    )
    assert tokenizer.pad_token is None
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        bos_token_id=token_to_id["<s>"],
        eos_token_id=token_to_id["</s>"],
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_lora_llama(dtype: Any, target_modules: list[str], **lora: Any) -> Any:
    """A random 2-layer Llama (hidden 64, MLP 160, GQA 4/2) in ``dtype`` with PEFT LoRA adapters
    (r 4, alpha 8, dropout 0.1, non-zero init; ``lora`` overrides) on ``target_modules``, in
    training mode; seeded, so every call builds the same model. In memory, nothing saved."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    settings = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.1, "target_modules": target_modules, "init_lora_weights": False, **lora}
    return get_peft_model(LlamaForCausalLM(config).to(dtype), LoraConfig(**settings)).train()


def save_random_adapters(base: Path, directory: Path, *, seed: int = 0, scale: float = 0.5) -> Path:
    """LoRA adapters (rank 4, alpha 8) on every linear layer of the model at ``base`` (last-token
    pooling) with random, non-zero B matrices (``seed``, times ``scale``; the A matrices from
    ``seed`` too), saved by anglekit to ``directory``: merging them changes the weights, so a vector
    made without them differs."""
    import torch

    from anglekit.model.embedder import Embedder

    torch.manual_seed(seed)
    embedder = Embedder.from_pretrained(str(base), pooling="last_token", device="cpu").add_lora(rank=4, alpha=8.0)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in embedder.backbone.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return embedder.save_pretrained(directory)


def build_tiny_gpt2(directory: Path, *, seed: int = 0) -> Path:
    """A random 2-layer GPT-2 (architecture ``GPT2LMHeadModel``: absolute position embeddings) with
    the tiny Llama's tokenizer (no pad token, left padding)."""
    import shutil

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    scratch = directory.parent / (directory.name + ".tokenizer")
    build_tiny_llama(scratch, seed=seed)
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(scratch / name, directory / name)
    shutil.rmtree(scratch)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=32,
        n_layer=2,
        n_head=2,
        n_positions=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    model = GPT2LMHeadModel(config)
    model.eval()
    model.save_pretrained(directory)
    return directory


def random_sentence(rng: random.Random, low: int = 2, high: int = 14) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words) + rng.choice([".", "!", "?", ""])


def write_stsb_root(root: Path, *, seed: int, train: int = 48) -> Path:
    """An STS-B-format data root (``root/stsb/sts-{train,dev,test}.csv``, ``train``/8/24 random pairs
    with scores in [0, 5]); returns ``root``."""
    rng = random.Random(seed)
    folder = root / "stsb"
    folder.mkdir(parents=True)
    for split, n in (("train", train), ("dev", 8), ("test", 24)):
        lines = []
        for i in range(n):
            a, b = random_sentence(rng, 3, 8), random_sentence(rng, 3, 8)
            lines.append(f"main-captions\tMSRvid\t2012{split}\t{i:04d}\t{rng.uniform(0, 5):.3f}\t{a}\t{b}")
        (folder / f"sts-{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def make_pairs(n: int = 64, *, seed: int = 0) -> list[dict[str, object]]:
    """``n`` distinct-ish sentence pairs with scores in [0, 5] (two decimals)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a = random_sentence(rng)
        if rng.random() < 0.5:
            words = a.split()
            rng.shuffle(words)
            b = " ".join(words[: max(1, len(words) - rng.randint(0, 2))])
        else:
            b = random_sentence(rng)
        rows.append({"text1": a, "text2": b, "label": round(rng.uniform(0.0, 5.0), 2)})
    return rows


def write_pairs(path: Path, n: int = 64, *, seed: int = 0) -> Path:
    """Write ``make_pairs`` as .jsonl, .csv or .tsv (by ``path``'s suffix)."""
    rows = make_pairs(n, seed=seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix in (".tsv", ".csv"):
        import csv

        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle, delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writerow(["text1", "text2", "label"])
            for r in rows:
                writer.writerow([r["text1"], r["text2"], r["label"]])
    else:
        raise ValueError(f"unsupported pair file suffix {path.suffix}")
    return path


def read_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _slow_cli(argv: list[str]) -> int:
    """``anglekit.cli.main(argv)`` with each training step delayed by $ANGLEKIT_TEST_STEP_SLEEP s and,
    with $ANGLEKIT_TEST_HOLD_AT_STEP=N, held before step N (after writing $ANGLEKIT_TEST_HOLD_FILE)
    until the process is killed (:func:`kill_when_held`)."""
    import time

    from anglekit.training.trainer import AnglETrainer

    delay = float(os.environ.get("ANGLEKIT_TEST_STEP_SLEEP", "0.3"))
    hold_at = int(os.environ.get("ANGLEKIT_TEST_HOLD_AT_STEP", "0"))  # hold before this step (1-based), until killed
    hold_file = os.environ.get("ANGLEKIT_TEST_HOLD_FILE")
    original = AnglETrainer.training_step

    def slow_training_step(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if hold_at and self.state.global_step + 1 == hold_at:
            if hold_file:
                Path(hold_file).write_text(str(hold_at), encoding="utf-8")
            while True:  # held: the test kills the process here
                time.sleep(1)
        time.sleep(delay)
        return original(self, *args, **kwargs)

    AnglETrainer.training_step = slow_training_step  # type: ignore[method-assign]
    from anglekit.cli import main

    return main(argv)


@dataclass
class Hold:
    """Where one killed run of :func:`kill_when_held` stops: ``held()`` says the process has reached
    the point and waits there (a fake server holding its request, a hook blocking a step); ``env``
    is what the run needs to be held (e.g. the step number for a hook)."""

    held: Callable[[], bool]
    env: dict[str, str] = field(default_factory=dict)
    point: Any = None
    """The chosen point, for the test's report (a request number, a step)."""


def kill_when_held(
    command: list[str],
    *,
    kills: int,
    arm: Callable[[int | None], Hold | None],
    resume_flag: str | None = None,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    finish: bool = True,
    **popen: Any,
) -> list[dict[str, Any]]:
    """Run ``command`` ``kills`` times, each killed (SIGKILL to its process group) while it is held
    at a point of its work, then once more to completion (``resume_flag`` appended after the first
    run, if given). ``arm(attempt)`` is called before each killed run: it picks the point (at random,
    from the test's seeded RNG) and makes the process stop there; ``arm(None)`` before the last run
    takes the hold away. The kill lands by construction: the process cannot finish while it is held,
    so no clock decides where it stops. ``timeout`` only guards against a hang (the run never reaching
    its point fails the test). Returns, per run: the point, whether the kill landed (the process was
    still running: always, unless it finished before its point, which the test should assert against)
    and the return code; the last run also its stderr. ``finish=False``: no last run. Every child is
    killed in a finally."""
    import signal
    import subprocess
    import time

    runs: list[dict[str, Any]] = []
    for attempt in range(kills + 1 if finish else kills):
        argv = command if attempt == 0 or resume_flag is None else [*command, resume_flag]
        hold = arm(attempt if attempt < kills else None)
        run_env = {**(env if env is not None else os.environ), **(hold.env if hold is not None else {})}
        process = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=run_env, **popen)
        try:
            if attempt < kills:
                if hold is None:
                    raise ValueError("arm(attempt) must return a Hold for every killed run")
                deadline = time.monotonic() + timeout
                while not hold.held() and process.poll() is None:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"run {attempt} never reached its point {hold.point!r} in {timeout:.0f} s")
                    time.sleep(0.01)
                landed = process.poll() is None
                if landed:
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
                err = process.stderr.read().decode(errors="replace")[-3000:] if process.stderr is not None else ""
                runs.append({"point": hold.point, "killed": landed, "returncode": process.returncode, **({} if landed else {"stderr": err})})
            else:
                started = time.monotonic()
                _, err_bytes = process.communicate(timeout=600)
                runs.append(
                    {
                        "point": None,
                        "killed": False,
                        "returncode": process.returncode,
                        "seconds": round(time.monotonic() - started, 2),
                        "stderr": err_bytes.decode(errors="replace")[-3000:],
                    }
                )
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=60)
            if process.stderr is not None:
                process.stderr.close()
    return runs


def held_file(path: Path) -> Callable[[], bool]:
    """``Hold.held`` for a hook that writes ``path`` when it starts waiting."""
    return path.exists


def run_cli(argv: list[str], capsys: Any) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``anglekit ARGV`` run in-process; argparse's SystemExit becomes the code."""
    from anglekit.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


class SoloServices:
    """What a training task asks of the trainer (gather, counts, probes), alone in one process:
    for calling a task's loss directly in a test."""

    def gather(self, *tensors: Any) -> tuple[list[Any], int]:
        return list(tensors), 0

    def count_candidates(self, positives: Any, negatives: Any) -> None:
        pass

    def probe(self, anchors: Any, positives: Any, negatives: Any) -> None:
        pass

    def probe_gradients(self, components: Any, wrt: Any) -> None:
        pass


def load_benchmark(name: str) -> Any:
    """The module of ``benchmarks/NAME.py``, imported under NAME (its own imports resolve as when it runs)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "slow-cli":
        print("usage: python tests/helpers.py slow-cli ANGLEKIT-ARGS...", file=sys.stderr)
        sys.exit(2)
    sys.exit(_slow_cli(sys.argv[2:]))
