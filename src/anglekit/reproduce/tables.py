"""The papers' tables as rows of cells: what each row trains, on what, how it is scored, and the
published figure beside it (from :mod:`anglekit.evaluation.paper`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STS_COLUMNS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R", "Avg")
"""Columns of the ``sts`` suite (Table 2 layout); the paper names the last one ``avg``."""


@dataclass(frozen=True)
class Published:
    """Where a row's published figures are: Table ``table``, the row whose column ``key`` is ``row``;
    ``columns`` maps our metric names to the paper's column names."""

    table: int
    row: str
    columns: dict[str, str]
    key: str | None = None
    note: str = ""
    approx_diff: float | None = None
    """When the paper gives only a difference from its reference row (no figure), that difference."""


@dataclass(frozen=True)
class Task:
    """One training set and its scoring: ``evaluation`` is ``pairs`` (Spearman x 100 of cosine vs
    labels on ``test``) or ``sts-suite`` (STS12-16, STS-B, SICK-R and their average)."""

    name: str
    train: str | None
    test: str | None
    evaluation: str
    positive_threshold: float | None = None
    metric_prefix: str = ""
    nested: tuple[int, ...] = ()
    """``nested`` evaluation: the leading dimensions ``test`` is also scored at (besides the full vector
    and the middle layer)."""


@dataclass(frozen=True)
class Row:
    """A row: ``kind`` is ``train`` (TrainConfig ``settings`` over the protocol, once per seed),
    ``zero-shot`` (the start as it is) or ``glove`` (averaged GloVe vectors)."""

    name: str
    kind: str = "train"
    settings: dict[str, Any] = field(default_factory=dict)
    published: Published | None = None


@dataclass(frozen=True)
class TableSpec:
    """A table: rows x tasks; the paired comparison is against ``reference`` on ``primary``."""

    name: str
    title: str
    paper: str
    rows: tuple[Row, ...]
    tasks: tuple[Task, ...]
    metrics: tuple[str, ...]
    primary: str
    reference: str
    notes: tuple[str, ...] = ()
    compare: tuple[str, ...] = ()
    """Metrics besides ``primary`` that get a paired comparison with the reference row too."""
    gradient_share: bool = False
    """Report each row's angle-term gradient relative to the cosine term's (from the cells' probes)."""


ANGLE_WEIGHTS: tuple[float, ...] = (0.0, 1.0, 5.0, 20.0, 35.0)
"""The angle term's weights of the ``angle-weight`` table: without it, the paper's (1), and up to the
official LLaMA recipe's (35)."""

NESTED_DIMS: tuple[int, ...] = (128, 64)
"""The truncated sizes the ``ese`` table scores (ESE's compressed size, 128, and half of it)."""

MIDDLE_LAYER = "STS-B test, middle layer"


def nested_metrics(dims: tuple[int, ...]) -> tuple[str, ...]:
    """Metrics of the ``nested`` evaluation: the full vector, its first ``d`` coordinates for each of
    ``dims``, and the vector of the middle transformer layer (ESE's layer truncation)."""
    return ("STS-B test", *(f"STS-B test @{d}" for d in dims), MIDDLE_LAYER)


def _t4(row: str) -> Published:
    return Published(4, row, {"STS-B test": "Spearman"})


# Our pooling name -> the paper's row name in Table 4 (right), in the paper's order.
POOLING_ROWS: tuple[tuple[str, str], ...] = (
    ("cls", "cls"),
    ("cls_avg", "cls-last-avg"),
    ("last_avg", "last-avg"),
    ("last_max", "last-max"),
    ("first_last_avg", "first-last-avg"),
)


def _t4_suite(row: str) -> Published:
    """Table 4's STS-B figure beside a table scored by the STS suite (whose column is ``STS-B``)."""
    return Published(4, row, {"STS-B": "Spearman"})


def _t4_pool(row: str) -> Published:
    return Published(4, row, {"STS-B test": "Spearman (2)"}, key="pooling")


def _t2(row: str) -> Published:
    cols = {c: c for c in STS_COLUMNS[:-1]}
    cols["Avg"] = "avg"
    return Published(2, row, cols)


def _t3(row: str) -> Published:
    return Published(3, row, {"MRPC test": "MRPC test", "STS-B test": "STS-B test", "QNLI": "QNLI validation", "GitHub Issues test": "GitHub Issues test"})


def build_tables(data: dict[str, str], options: dict[str, Any]) -> dict[str, TableSpec]:
    """Every table, with data specs from ``data`` (``stsb``, ``mrpc``, ``qnli-train``, ``qnli-test``,
    ``nli-pairs``, ``nli``, ``github`` (or None), ``llm-pairs``, ``llm-sentences``, ``unsup``) and
    ``options`` (``unsup_steps``, ``llm_steps``)."""
    stsb = Task("STS-B", f"{data['stsb']}:train", f"{data['stsb']}:test", "pairs")
    stsb_metric = ("STS-B test",)
    paper = {"objective": "paper"}
    phase = {"objective": "paper-phase"}
    objectives = TableSpec(
        "objectives",
        "Objectives ablation, STS-B test (Table 4, left)",
        "Table 4",
        rows=(
            Row("zero-shot (no training)", "zero-shot"),
            Row("all: cosine + ibn + angle", settings=paper, published=_t4("all (cosine + ibn + angle)")),
            Row("all, phase angle", settings=phase, published=_t4("all (cosine + ibn + angle)")),
            Row("without ibn", settings={**paper, "ibn_weight": 0.0}, published=_t4("without ibn")),
            Row("without ibn, phase angle", settings={**phase, "ibn_weight": 0.0}, published=_t4("without ibn")),
            Row("without angle", settings={**paper, "angle_weight": 0.0}, published=_t4("without angle")),
            Row("only cosine", settings={"objective": "cosine"}, published=_t4("only cosine")),
            Row("only ibn", settings={"objective": "ibn"}, published=_t4("only ibn")),
            Row("only angle", settings={"objective": "angle"}, published=_t4("only angle")),
            Row("only angle, phase", settings={"objective": "angle-phase"}, published=_t4("only angle")),
        ),
        tasks=(stsb,),
        metrics=stsb_metric,
        primary="STS-B test",
        reference="all: cosine + ibn + angle",
        notes=(
            "Angle variants: 'reference' is the official code's angle score (the default), 'phase' the paper's "
            "angle difference of eq. 6-7; the paper's figures are for its own implementation.",
        ),
    )
    pooling = TableSpec(
        "pooling",
        "Pooling ablation, STS-B test (Table 4, right)",
        "Table 4",
        rows=tuple(Row(ours, settings={**paper, "pooling": ours}, published=_t4_pool(theirs)) for ours, theirs in POOLING_ROWS),
        tasks=(stsb,),
        metrics=stsb_metric,
        primary="STS-B test",
        reference="cls",
        notes=(
            "Every row trains the paper's objective (cosine + ibn + angle); only the pooling differs. A start "
            "trained with mean pooling (all-MiniLM-L6-v2: last_avg) favours its own pooling.",
        ),
    )
    ibn = TableSpec(
        "ibn-duplicates",
        "In-batch negatives with and without identical-sentence detection, STS-B test",
        "Table 4 note",
        rows=(
            Row("cosine + ibn + angle, with detection", settings=paper, published=_t4("all (cosine + ibn + angle)")),
            Row(
                "cosine + ibn + angle, without detection",
                settings={**paper, "ibn_detect_duplicates": False},
                published=Published(
                    4, "all (cosine + ibn + angle)", {}, approx_diff=-0.18, note="the paper gives no figure, only 'about 0.18 lower' than with detection"
                ),
            ),
        ),
        tasks=(stsb,),
        metrics=stsb_metric,
        primary="STS-B test",
        reference="cosine + ibn + angle, with detection",
        notes=(
            "Without detection a text identical to the positive (or to the anchor) elsewhere in the batch is a "
            "negative. STS-B train repeats few sentences inside a batch of 32, so a small effect is expected.",
        ),
    )
    nli_pairs = Task("NLI pairs", data["nli-pairs"], None, "sts-suite", positive_threshold=1.0)
    nli_triplets = Task("NLI triplets", data["nli"], None, "sts-suite")
    transfer = TableSpec(
        "transfer-sts",
        "Transfer STS: trained on NLI, scored on STS12-16, STS-B, SICK-R (Table 2 protocol)",
        "Table 2",
        rows=(
            Row("GloVe 6B 50-d (avg.)", "glove", published=_t2("GloVe (avg.)")),
            Row("zero-shot (no training)", "zero-shot"),
            Row("SimCSE supervised (NLI triplets)", settings={"objective": "simcse-sup", "_task": "NLI triplets"}, published=_t2("SimCSE-BERT (sup.)")),
            Row("AnglE: cosine + ibn + angle (NLI pairs)", settings={**paper, "_task": "NLI pairs"}, published=_t2("AnglE-BERT")),
        ),
        tasks=(nli_pairs, nli_triplets),
        metrics=STS_COLUMNS,
        primary="Avg",
        reference="AnglE: cosine + ibn + angle (NLI pairs)",
        notes=(
            "NLI pairs: each triplet gives (anchor, entailment, 1) and (anchor, contradiction, 0). The paper's GloVe "
            "row is 840B 300-d vectors (SentEval); the offline package is 6B 50-d, weaker.",
        ),
    )
    tasks = [
        Task("MRPC", f"{data['mrpc']}:train", f"{data['mrpc']}:test", "pairs", positive_threshold=1.0, metric_prefix="MRPC test"),
        Task("STS-B", f"{data['stsb']}:train", f"{data['stsb']}:test", "pairs", metric_prefix="STS-B test"),
        Task("QNLI", data["qnli-train"], data["qnli-test"], "pairs", positive_threshold=1.0, metric_prefix="QNLI"),
        Task(
            "GitHub Issues",
            f"{data['github']}:train" if data.get("github") else None,
            f"{data['github']}:test" if data.get("github") else None,
            "pairs",
            positive_threshold=1.0,
            metric_prefix="GitHub Issues test",
        ),
    ]
    nontransfer = TableSpec(
        "non-transfer",
        "Non-transfer: train on each set's train split, score its test split (Table 3)",
        "Table 3",
        rows=(
            Row("zero-shot (no training)", "zero-shot"),
            Row("AnglE: cosine + ibn + angle", settings=paper, published=_t3("AnglE-BERT")),
            Row("only cosine (CoSENT)", settings={"objective": "cosine"}, published=_t3("SBERT")),
        ),
        tasks=tuple(tasks),
        metrics=("MRPC test", "STS-B test", "QNLI", "GitHub Issues test", "Avg"),
        primary="Avg",
        reference="AnglE: cosine + ibn + angle",
        notes=(
            "QNLI: only GLUE's dev set is offline; its questions are split in two halves (train / test, seed 0), "
            "the paper trains on QNLI train and scores dev. The only-cosine row is beside the paper's SBERT row "
            "(the nearest objective; SBERT itself trains a classifier on NLI). Avg is over the columns measured.",
        ),
    )
    llm_steps = options.get("llm_steps")
    llm = TableSpec(
        "llm-supervised",
        "LLM-supervised pairs vs unsupervised, STS-B test (Table 5 at this scale)",
        "Table 5",
        rows=(
            Row("zero-shot (no training)", "zero-shot"),
            Row(
                "AnglE on LLM-labelled pairs",
                settings={**paper, "positive_threshold": 1.0, "_task": "LLM pairs"},
                published=Published(5, "AnglE-BERT + LLaMA (LLaMA2-7B)", {"STS-B test": "Spearman"}, note="the paper's LLM is LLaMA2-7B, here a 135M model"),
            ),
            Row(
                "SimCSE unsupervised, the same sentences",
                settings={"objective": "simcse-unsup", "_task": "LLM sentences", "max_steps": llm_steps},
                published=Published(5, "SimCSE-BERT (unsup.)", {"STS-B test": "Spearman"}),
            ),
        ),
        tasks=(
            Task("LLM pairs", data.get("llm-pairs"), f"{data['stsb']}:test", "pairs"),
            Task("LLM sentences", data.get("llm-sentences"), f"{data['stsb']}:test", "pairs"),
        ),
        metrics=stsb_metric,
        primary="STS-B test",
        reference="AnglE on LLM-labelled pairs",
        notes=(
            "The LLM labels each sentence's same-meaning and opposite-meaning rewrites (anglekit generate); SimCSE trains as many steps on the same sentences.",
        ),
    )
    unsup = {"batch_size": 64, "learning_rate": 3e-5, "max_length": 32, "max_steps": options.get("unsup_steps", 250), "_task": "sentences"}
    simace = TableSpec(
        "simace",
        "SimACE vs SimCSE without labels (STS suite)",
        "SimACE",
        rows=(
            Row("zero-shot (no training)", "zero-shot"),
            Row("SimCSE unsupervised (cosine, tau 0.05)", settings={"objective": "simcse-unsup", **unsup}, published=_t2("SimCSE-BERT (unsup.)")),
            Row("SimACE unsupervised (angle, margin 10°)", settings={"objective": "simace-unsup", **unsup}),
        ),
        tasks=(Task("sentences", data["unsup"], None, "sts-suite"),),
        metrics=STS_COLUMNS,
        primary="Avg",
        reference="SimCSE unsupervised (cosine, tau 0.05)",
        notes=(
            "Unlabelled corpus: SentEval MR and SUBJ sentences and Flickr30k captions (SimCSE's Wikipedia 1M is not "
            "offline). The SimACE paper's figures are not shipped with anglekit.",
        ),
    )
    suite_after_stsb = Task("STS-B train", f"{data['stsb']}:train", None, "sts-suite")
    probes = {"probe_steps": 10}
    angle_weight = TableSpec(
        "angle-weight",
        "The angle term's weight: the full objective with w3 = 0, 1, 5, 20, 35 (STS-B train; STS suite)",
        "Table 4 (without angle), extended",
        rows=tuple(
            Row(
                f"w3 = {w:g}" + (" (without angle)" if w == 0 else " (paper)" if w == 1 else " (official LLaMA recipe)" if w == 35 else ""),
                settings={**paper, "angle_weight": w, **probes},
                published=_t4_suite("without angle") if w == 0 else _t4_suite("all (cosine + ibn + angle)") if w == 1 else None,
            )
            for w in ANGLE_WEIGHTS
        ),
        tasks=(suite_after_stsb,),
        metrics=STS_COLUMNS,
        primary="STS-B",
        reference="w3 = 0 (without angle)",
        compare=("Avg", "SICK-R", "STS12", "STS13", "STS14", "STS15", "STS16"),
        gradient_share=True,
        notes=(
            "Every row trains the paper's objective (cosine + ibn + angle, tau 0.05 / 0.05 / 1.0) on STS-B train and "
            "differs only in the angle term's weight w3; the reference is w3 = 0. Scored on STS12-16 (SentEval 'all'), "
            "STS-B test and SICK-R test. The paper's column here is Table 4's STS-B figures with (w3 = 1) and without "
            "the angle term.",
            "angle/cosine gradient: w3 x ||dL_angle/dE|| / ||dL_cosine/dE|| over the run (mean of the probes every "
            "10 steps, E the pooled embeddings of the batch): the share of the update the angle term drives.",
        ),
    )
    dims = NESTED_DIMS
    nested_stsb = Task("STS-B", f"{data['stsb']}:train", f"{data['stsb']}:test", "nested", nested=dims)
    nested = nested_metrics(dims)
    ese = TableSpec(
        "ese",
        "ESE (2D Matryoshka): STS-B test at full size, cut to 128 and 64 dimensions, and from the middle layer",
        "ESE (Espresso)",
        rows=(
            Row("zero-shot (no training)", "zero-shot"),
            Row("AnglE (cosine + ibn + angle)", settings=paper),
            Row(
                f"AnglE + ESE (k = {dims[0]}, T = 1.0)",
                settings={**paper, "ese": True, "ese_compression_size": dims[0], "ese_kl_temperature": 1.0, "ese_target": "angle-emb"},
            ),
            Row(
                f"AnglE + ESE, unit target (k = {dims[0]}, T = 1.0)",
                settings={**paper, "ese": True, "ese_compression_size": dims[0], "ese_kl_temperature": 1.0, "ese_target": "unit"},
            ),
        ),
        tasks=(nested_stsb,),
        metrics=nested,
        primary=nested[-2],
        reference="AnglE (cosine + ibn + angle)",
        compare=tuple(m for m in nested if m != nested[-2]),
        notes=(
            "ESE at angle-emb's settings (--apply_ese 1, compression size 128, KL temperature 1.0; --ese-target angle-emb) over the paper's "
            "objective, against the same objective without it. '@k': the first k coordinates (normalised after the "
            "cut); 'middle layer': the pooled output of transformer layer n/2 (n = the model's layers), as if the model "
            "stopped there. The ESE paper's own figures are not shipped offline, so this table compares with and "
            "without ESE only.",
            "'unit target': ESE's compression term on the L2-normalised vectors (--ese-target unit, anglekit's default; not in angle-emb), "
            "which does not grow with the model's activations; angle-emb's diverges from SmolLM2 (docs/reproduce.md).",
        ),
    )
    tables = (objectives, pooling, ibn, transfer, nontransfer, llm, simace, angle_weight, ese)
    return {t.name: t for t in tables}


def row_tasks(table: TableSpec, row: Row) -> list[Task]:
    """The tasks a row runs: the one its settings name (``_task``), else every task of the table."""
    wanted = row.settings.get("_task")
    if wanted is None:
        return list(table.tasks)
    return [t for t in table.tasks if t.name == wanted]
