"""The ``transfer`` suite: SentEval's transfer protocol on frozen embeddings (AnglE's Table 6 layout).

Tasks and splits:

* ``MR``, ``CR``, ``SUBJ``, ``MPQA``: no fixed split; 10-fold *stratified* cross-validation with
  shuffling seeded by ``seed`` (same seed -> same folds); the accuracy is the mean over the folds.
* ``SST2``: train / dev / test (``SST/binary``); the regulariser is chosen on dev.
* ``TREC``: train / test; label = the coarse class (6 classes) before ``:``.
* ``MRPC``: train / test (SentEval's tokenised copy); features of a pair ``[u, v, |u - v|, u * v]``
  by default (``mrpc_features``; to our knowledge SentEval's own MRPC code uses
  ``[|u - v|, u * v]``, available as ``("abs", "prod")``).

Classifier: scikit-learn ``LogisticRegression`` (lbfgs, multinomial for TREC, ``max_iter`` 1000 by
default) on the raw embeddings (no scaling, as SentEval). The inverse regularisation ``C`` is
chosen from ``c_grid`` (default 2^-2, 2^0, 2^2, 2^4, 2^6: SentEval's grid 2^-2..2^3, widened upwards
because L2-normalised embeddings need weaker regularisation) by the mean accuracy of an inner
stratified ``inner_folds``-fold CV on the training part (for the k-fold tasks: inside every outer
fold, so the test fold never influences the choice), or on the dev split where one exists (SST-2).
Ties go to the smaller C. The chosen C per task/fold is recorded. Accuracy x 100 (MRPC also F1).

Speed: fits along the C grid are warm-started (the optimum of the convex problem does not depend on
the starting point), and BLAS is limited to ``blas_threads`` (1) threads while fitting: on a busy
2-core machine multi-threaded BLAS made these small fits ~50x slower. Convergence warnings are
counted in the result (``fits_not_converged``), not hidden.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anglekit.data import senteval as se
from anglekit.errors import ConfigError
from anglekit.evaluation.encoders import encode_unique, progress_enabled, rows
from anglekit.evaluation.tables import markdown_table, mean

TRANSFER_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
KFOLD_TASKS = ("MR", "CR", "SUBJ", "MPQA")
DEFAULT_C_GRID = (0.25, 1.0, 4.0, 16.0, 64.0)
MRPC_FEATURES = {"u": "u", "v": "v", "abs": "|u-v|", "prod": "u*v"}


def stratified_folds(labels: np.ndarray, n_folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index arrays of a shuffled stratified k-fold split, reproducible from ``seed``."""
    from sklearn.model_selection import StratifiedKFold

    labels = np.asarray(labels)
    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [(tr, te) for tr, te in skf.split(np.zeros(len(labels)), labels)]


class _Fitter:
    """Fits logistic regressions and counts convergence warnings (reported, never hidden)."""

    def __init__(self, max_iter: int, seed: int) -> None:
        self.max_iter = max_iter
        self.seed = seed
        self.fits = 0
        self.not_converged = 0

    def fit(self, x: np.ndarray, y: np.ndarray, c: float, clf: Any = None) -> Any:
        """Fit at ``c``; passing the previous ``clf`` (fitted at a smaller C) warm-starts lbfgs from it."""
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        if clf is None:
            clf = LogisticRegression(C=c, solver="lbfgs", max_iter=self.max_iter, random_state=self.seed, warm_start=True)
        else:
            clf.set_params(C=c)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            clf.fit(x, y)
        self.fits += 1
        if any(issubclass(w.category, ConvergenceWarning) for w in caught):
            self.not_converged += 1
        return clf

    def select_c(
        self, x: np.ndarray, y: np.ndarray, grid: Sequence[float], *, inner_folds: int, dev: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[float, dict[str, float]]:
        """The C of ``grid`` with the best accuracy on ``dev``, else on inner stratified folds.

        Along the (ascending) grid each fit starts from the previous solution (warm start): the
        optimum of the convex L2-regularised problem does not depend on the starting point, only
        the number of lbfgs iterations does.
        """
        grid = sorted(grid)
        splits = [(x, y, dev[0], dev[1])] if dev is not None else [(x[tr], y[tr], x[te], y[te]) for tr, te in stratified_folds(y, inner_folds, self.seed)]
        accs = np.zeros((len(splits), len(grid)))
        for s, (xtr, ytr, xte, yte) in enumerate(splits):
            clf = None
            for g, c in enumerate(grid):
                clf = self.fit(xtr, ytr, c, clf)
                accs[s, g] = np.mean(clf.predict(xte) == yte)
        mean_acc = accs.mean(axis=0) * 100
        scores = {repr(float(c)): float(a) for c, a in zip(grid, mean_acc, strict=True)}
        best = int(np.flatnonzero(mean_acc == mean_acc.max())[0])  # ties -> the smaller C
        return float(grid[best]), scores


def kfold_accuracy(x: np.ndarray, y: np.ndarray, fitter: _Fitter, *, n_folds: int, inner_folds: int, grid: Sequence[float], seed: int) -> dict[str, Any]:
    """Nested stratified CV: C tuned on inner folds of each outer training part."""
    accs, chosen = [], []
    for tr, te in stratified_folds(y, n_folds, seed):
        c, _ = fitter.select_c(x[tr], y[tr], grid, inner_folds=inner_folds)
        clf = fitter.fit(x[tr], y[tr], c)
        accs.append(float(np.mean(clf.predict(x[te]) == y[te]) * 100))
        chosen.append(c)
    return {"accuracy": float(np.mean(accs)), "fold_accuracy": accs, "chosen_C": chosen, "n": int(len(y)), "n_folds": n_folds}


def split_accuracy(
    xtr: np.ndarray,
    ytr: np.ndarray,
    xte: np.ndarray,
    yte: np.ndarray,
    fitter: _Fitter,
    *,
    grid: Sequence[float],
    inner_folds: int,
    dev: tuple[np.ndarray, np.ndarray] | None = None,
    f1: bool = False,
) -> dict[str, Any]:
    c, grid_scores = fitter.select_c(xtr, ytr, grid, inner_folds=inner_folds, dev=dev)
    clf = fitter.fit(xtr, ytr, c)
    pred = clf.predict(xte)
    out: dict[str, Any] = {
        "accuracy": float(np.mean(pred == yte) * 100),
        "chosen_C": c,
        "selection": "dev" if dev is not None else f"{inner_folds}-fold CV on train",
        "selection_accuracy": grid_scores,
        "n_train": int(len(ytr)),
        "n_test": int(len(yte)),
    }
    if dev is not None:
        out["n_dev"] = int(len(dev[1]))
    if f1:
        from sklearn.metrics import f1_score

        out["f1"] = float(f1_score(yte, pred) * 100)
    return out


def pair_features(u: np.ndarray, v: np.ndarray, parts: Sequence[str]) -> np.ndarray:
    pieces = {"u": lambda: u, "v": lambda: v, "abs": lambda: np.abs(u - v), "prod": lambda: u * v}
    unknown = [p for p in parts if p not in pieces]
    if unknown or not parts:
        raise ConfigError(f"unknown MRPC feature part(s) {unknown}; choose from {sorted(pieces)}")
    return np.concatenate([pieces[p]() for p in parts], axis=1)


def load_transfer_data(data_root: str | os.PathLike[str], tasks: Sequence[str]) -> dict[str, Any]:
    unknown = [t for t in tasks if t not in TRANSFER_TASKS]
    if unknown:
        raise ConfigError(f"unknown transfer task(s) {unknown}; choose from {', '.join(TRANSFER_TASKS)}")
    root = Path(data_root) / "senteval"
    data: dict[str, Any] = {}
    for task in tasks:
        if task in KFOLD_TASKS:
            data[task] = se.load_binary_task(root, task)
        elif task == "SST2":
            data[task] = {s: se.load_sst_binary(root, s) for s in ("train", "dev", "test")}
        elif task == "TREC":
            data[task] = {s: se.load_trec(root, s) for s in ("train", "test")}
        else:
            data[task] = {s: se.load_mrpc_senteval(root, s) for s in ("train", "test")}
    return data


def _texts(item: Any) -> list[str]:
    if isinstance(item, dict):
        return [t for part in item.values() for t in _texts(part)]
    if isinstance(item, se.ScoredPairs):
        return [*item.text1, *item.text2]
    return list(item.texts)


def _notes(item: Any) -> list[str]:
    if isinstance(item, dict):
        return [n for part in item.values() for n in _notes(part)]
    return list(getattr(item, "notes", ()))


def evaluate_transfer(
    encode: Callable[..., np.ndarray],
    data_root: str | os.PathLike[str],
    *,
    tasks: Sequence[str] = TRANSFER_TASKS,
    seed: int = 1111,
    n_folds: int = 10,
    inner_folds: int = 3,
    c_grid: Sequence[float] = DEFAULT_C_GRID,
    max_iter: int = 1000,
    mrpc_features: Sequence[str] = ("u", "v", "abs", "prod"),
    blas_threads: int | None = 1,
) -> dict[str, Any]:
    """Run the transfer suite (see the module doc). Returns the result dict."""
    if n_folds < 2 or inner_folds < 2:
        raise ConfigError(f"n_folds and inner_folds must be >= 2, got {n_folds} and {inner_folds}")
    if not c_grid or any(c <= 0 for c in c_grid):
        raise ConfigError(f"c_grid must hold positive numbers, got {list(c_grid)}")
    grid = sorted(float(c) for c in c_grid)
    data = load_transfer_data(data_root, tasks)
    vectors, index = encode_unique(encode, *[_texts(item) for item in data.values()], desc="transfer: encode")
    fitter = _Fitter(max_iter, seed)
    scores: dict[str, float] = {}
    details: dict[str, Any] = {}
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    limits = threadpool_limits(limits=blas_threads) if blas_threads else None
    try:
        for task in tqdm(list(data), desc="transfer: classifiers", leave=False, disable=not progress_enabled(encode)):
            _run_task(
                task,
                data[task],
                vectors,
                index,
                fitter,
                details,
                scores,
                n_folds=n_folds,
                inner_folds=inner_folds,
                grid=grid,
                seed=seed,
                mrpc_features=mrpc_features,
            )
    finally:
        if limits is not None:
            limits.restore_original_limits()
    columns = list(data)
    scores["Avg"] = mean([scores[c] for c in columns])
    return {
        "suite": "transfer",
        "metric": "accuracy x 100 of logistic regression on frozen embeddings",
        "columns": [*columns, "Avg"],
        "scores": scores,
        "details": details,
        "classifier": {
            "model": "sklearn LogisticRegression(lbfgs)",
            "max_iter": max_iter,
            "c_grid": grid,
            "inner_folds": inner_folds,
            "n_folds": n_folds,
            "seed": seed,
            "fits": fitter.fits,
            "fits_not_converged": fitter.not_converged,
            "blas_threads": blas_threads,
        },
        "n_texts_encoded": len(index),
    }


def _run_task(
    task: str,
    item: Any,
    vectors: np.ndarray,
    index: dict[str, int],
    fitter: _Fitter,
    details: dict[str, Any],
    scores: dict[str, float],
    *,
    n_folds: int,
    inner_folds: int,
    grid: Sequence[float],
    seed: int,
    mrpc_features: Sequence[str],
) -> None:
    if task in KFOLD_TASKS:
        x = rows(vectors, index, item.texts)
        det = kfold_accuracy(x, item.labels, fitter, n_folds=n_folds, inner_folds=inner_folds, grid=grid, seed=seed)
        det["n_empty_sentences"] = item.n_empty
        det["class_counts"] = {item.classes[k]: int(v) for k, v in zip(*np.unique(item.labels, return_counts=True), strict=True)}
    elif task in ("SST2", "TREC"):
        parts = {s: (rows(vectors, index, d.texts), d.labels) for s, d in item.items()}
        det = split_accuracy(*parts["train"], *parts["test"], fitter, grid=grid, inner_folds=inner_folds, dev=parts.get("dev"))
    else:
        feats = {
            s: (pair_features(rows(vectors, index, d.text1), rows(vectors, index, d.text2), mrpc_features), d.labels.astype(np.int64)) for s, d in item.items()
        }
        det = split_accuracy(*feats["train"], *feats["test"], fitter, grid=grid, inner_folds=inner_folds, f1=True)
        det["features"] = [MRPC_FEATURES[p] for p in mrpc_features]
    notes = _notes(item)
    if notes:
        det["encoding_notes"] = notes
    details[task] = det
    scores[task] = det["accuracy"]


def transfer_markdown(result: dict[str, Any], *, title: str = "model") -> str:
    cols = result["columns"]
    cl = result["classifier"]
    rows_ = []
    for task, d in result["details"].items():
        c = d["chosen_C"]
        c_text = ", ".join(f"{v:g}" for v in sorted(set(c))) if isinstance(c, list) else f"{c:g}"
        extra = f"F1 {d['f1']:.2f}" if "f1" in d else ""
        rows_.append([task, d["accuracy"], c_text, extra])
    return "\n".join(
        [
            "## Transfer tasks (accuracy x 100, logistic regression on frozen embeddings)",
            "",
            markdown_table(["model", *cols], [[title, *[result["scores"][c] for c in cols]]]),
            "",
            f"Classifier: {cl['model']}, max_iter {cl['max_iter']}, C chosen from {cl['c_grid']} "
            f"(dev split for SST2, else {cl['inner_folds']}-fold inner CV); MR/CR/SUBJ/MPQA: {cl['n_folds']}-fold "
            f"stratified CV, seed {cl['seed']}. Fits: {cl['fits']}, not converged: {cl['fits_not_converged']}.",
            "",
            markdown_table(["task", "accuracy", "chosen C", ""], rows_),
            "",
        ]
    )
