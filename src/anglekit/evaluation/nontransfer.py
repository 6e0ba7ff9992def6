"""The ``non-transfer`` suite (layout of AnglE's Table 3): Spearman x 100 between cosine and labels.

Datasets (all test splits except QNLI, whose test labels are not public):

* ``MRPC``: MRPC test (1725 pairs, labels 0/1), ``mrpc/msr-para-test.tsv`` (original text) via
  :func:`anglekit.data.catalog.load_mrpc`;
* ``STS-B``: STS-B test (1379 pairs, 0-5), ``stsb/sts-test.csv`` (original casing) via
  :func:`anglekit.data.catalog.load_stsb`;
* ``QNLI``: GLUE QNLI *dev* (5463 pairs; the test labels are hidden and the train set is not
  available offline), ``qnli/dev.tsv``, label entailment = 1, not_entailment = 0;
* any further pair dataset given by a spec (``extra=["sick:test", "my_pairs.jsonl"]``) resolved by
  :func:`anglekit.data.catalog.resolve_dataset`.

As in the paper, binary labels are correlated as they are (Spearman against 0/1).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data.senteval import ScoredPairs, read_lines
from anglekit.errors import ConfigError, DataError
from anglekit.evaluation.encoders import encode_unique, rows
from anglekit.evaluation.tables import markdown_table, mean
from anglekit.metrics.similarity import check_scorable, correlation_scores, paired_cosine

NONTRANSFER_DATASETS = ("MRPC", "STS-B", "QNLI")
QNLI_HEADER = ("index", "question", "sentence", "label")
QNLI_LABELS = {"entailment": 1.0, "not_entailment": 0.0}


def load_qnli(path: str | os.PathLike[str]) -> ScoredPairs:
    """GLUE QNLI TSV (header ``index, question, sentence, label``): entailment = 1, not_entailment = 0."""
    tf = read_lines(path, what="GLUE QNLI: a TAB header 'index, question, sentence, label' then one pair a line")
    if not tf.lines or tuple(c.strip() for c in tf.lines[0].split("\t")) != QNLI_HEADER:
        got = tf.lines[0][:120] if tf.lines else "an empty file"
        raise DataError(f"expected the header {'<TAB>'.join(QNLI_HEADER)}, got {got!r}", source=tf.path, row=0)
    text1, text2, labels = [], [], []
    for row, line in enumerate(tf.lines[1:], start=1):
        parts = line.split("\t")
        if len(parts) != 4:
            raise DataError(f"expected 4 tab-separated columns ({', '.join(QNLI_HEADER)}), got {len(parts)}", source=tf.path, row=row)
        label = parts[3].strip()
        if label not in QNLI_LABELS:
            raise DataError(f"expected a label in {sorted(QNLI_LABELS)}, got {label!r}", source=tf.path, row=row, field="label")
        text1.append(parts[1])
        text2.append(parts[2])
        labels.append(QNLI_LABELS[label])
    return ScoredPairs("QNLI", "dev", text1, text2, np.asarray(labels, dtype=np.float64), tf.path, tf.encoding)


def _load(name: str, root: Path) -> Any:
    from anglekit.data import catalog

    if name == "MRPC":
        return catalog.load_mrpc(root / "mrpc", "test")
    if name == "STS-B":
        return catalog.load_stsb(root / "stsb", "test")
    if name == "QNLI":
        return load_qnli(root / "qnli" / "dev.tsv")
    raise ConfigError(f"unknown non-transfer dataset {name!r}; built in: {', '.join(NONTRANSFER_DATASETS)} (others go in extra=[spec, ...])")


def evaluate_nontransfer(
    encode: Callable[..., np.ndarray], data_root: str | os.PathLike[str], *, datasets: Sequence[str] = NONTRANSFER_DATASETS, extra: Sequence[str] = ()
) -> dict[str, Any]:
    """Run the non-transfer suite; ``extra`` specs are resolved with ``catalog.resolve_dataset``."""
    root = Path(data_root)
    loaded: dict[str, Any] = {name: _load(name, root) for name in datasets}
    if extra:
        from anglekit.data.catalog import resolve_dataset

        for spec in extra:
            if spec in loaded:
                raise ConfigError(f"dataset {spec!r} is given twice")
            loaded[spec] = resolve_dataset(spec, default_split="test", data_root=root)
    if not loaded:
        raise ConfigError("the non-transfer suite needs at least one dataset")
    for name, ds in loaded.items():  # an undefined score is found before the encoding, and names its data
        check_scorable(ds.labels, f"non-transfer {name} ({ds.source})")
    groups = [t for ds in loaded.values() for t in (ds.text1, ds.text2)]
    vectors, index = encode_unique(encode, *groups, desc="non-transfer: encode")
    scores: dict[str, float] = {}
    details: dict[str, Any] = {}
    for name, ds in loaded.items():
        cos = paired_cosine(rows(vectors, index, ds.text1), rows(vectors, index, ds.text2))
        result = correlation_scores(cos, ds.labels, source=f"non-transfer {name} ({ds.source})")
        scores[name] = result.spearman
        details[name] = {
            **result.as_dict(),
            "source": str(ds.source),
            "dataset": getattr(ds, "name", name),
            "split": getattr(ds, "split", None) or str(getattr(ds, "name", "")).rpartition(":")[2],
        }
        skipped = getattr(ds, "skipped", None)
        if skipped:
            details[name]["skipped_rows"] = dict(skipped)
    columns = list(loaded)
    scores["Avg"] = mean([scores[c] for c in columns])
    return {
        "suite": "non-transfer",
        "metric": "spearman x 100 of cosine vs labels (binary labels as 0/1)",
        "columns": [*columns, "Avg"],
        "scores": scores,
        "details": details,
        "n_texts_encoded": len(index),
    }


def nontransfer_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    cols = result["columns"]
    lines = [
        "## Non-transfer tasks (Spearman x 100, cosine vs labels)",
        "",
        markdown_table(["model", *cols], [[title, *[result["scores"][c] for c in cols]]]),
        "",
        markdown_table(
            ["dataset", "split", "pairs", "spearman", "pearson", "source"],
            [[n, d["split"], d["n_pairs"], d["spearman"], d["pearson"], d["source"]] for n, d in result["details"].items()],
        ),
        "",
    ]
    return "\n".join(lines)
