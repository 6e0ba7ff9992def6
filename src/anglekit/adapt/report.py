"""The report of an adapt run (``report.json`` and ``report.md``), built from the stages' records:
queries kept per filter, negatives per row, the teacher's score statistics, training speed, and the
scores of the start, the trained model and each merge on the same retrieval set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anglekit.adapt.config import AdaptConfig

SHOWN = ("ndcg@10", "mrr@10", "recall@1", "recall@10")
"""The retrieval metrics report.md shows (report.json holds all)."""


def _stat(stats: dict[str, Any] | None, key: str) -> str:
    value = (stats or {}).get(key)
    return f"{value:.4f}" if isinstance(value, int | float) else "-"


def build_report(
    config: AdaptConfig, stages: dict[str, Any], info: dict[str, Any], scores: dict[str, dict[str, Any]], paths: dict[str, Path]
) -> dict[str, Any]:
    """The report's data (what report.json holds)."""
    queries, split, mine, train = info["queries"], info["split"], info["mine"], info["train"]
    start = scores["start"]["scores"]
    return {
        "settings": config.recorded(),
        "output_dir": str(Path(config.output_dir)),
        "stages": {name: {k: record.get(k) for k in ("status", "command", "seconds", "finished")} for name, record in stages.items()},
        "queries": {
            "file": str(paths["queries"]),
            "documents": queries["documents"]["given"],
            "unique_documents": queries["documents"]["unique"],
            "candidates": queries["candidates"],
            "kept": queries["queries"]["total"],
            "documents_with_queries": queries["queries"]["documents_with_queries"],
            "dropped_by_filter": queries["filters"],
            "consistency": queries["consistency"],
            "queries_per_s": queries["queries_per_s"],
            "generation_seconds": queries["elapsed_s"],
        },  # fmt: skip
        "split": split,
        "mining": {
            "file": str(paths["mined"]),
            "pairs": mine["pairs"],
            "rows": mine["rows_written"],
            "negatives_per_row": mine["negatives_per_row"],
            "num_negatives": mine["settings"]["num_negatives"],
            "skipped": mine["skipped"],
            "seconds": mine["seconds"],
            "model_scores": mine["scores"],
        },  # fmt: skip
        "teacher": mine.get("teacher"),
        "training": {"model_dir": str(paths["model"]), **train},
        "eval_data": config.eval_data or str(paths["dev"]),
        "scores": {name: s["scores"] for name, s in scores.items()},
        "gain": {name: {m: s["scores"][m] - start[m] for m in start} for name, s in scores.items() if name != "start"},
    }


def report_markdown(report: dict[str, Any], *, brief: bool = False) -> str:
    """report.md (``brief``: the scores and the files only, for the command's output)."""
    q, mining, teacher, training = report["queries"], report["mining"], report["teacher"], report["training"]
    rows = ["| model | " + " | ".join(SHOWN) + " |", "|---|" + "---:|" * len(SHOWN)]
    for name, scores in report["scores"].items():
        gain = report["gain"].get(name, {})
        cells = [f"{100 * scores[m]:.2f}" + (f" ({100 * gain[m]:+.2f})" if m in gain else "") for m in SHOWN]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    table = "\n".join(rows)
    data = f"Scores on {report['eval_data']} (x100; in brackets: against the start):\n\n{table}\n"
    if brief:
        return f"{data}\nmodel: {training['model_dir']}; report: {Path(report['output_dir']) / 'report.md'}"
    dropped = ", ".join(f"{k} {v}" for k, v in q["dropped_by_filter"].items())
    consistency = q["consistency"]
    kept_by = (
        f"the consistency filter ({consistency['model']}, top {consistency['top_k']}) kept {consistency['kept']} of {consistency['checked']}"
        if consistency
        else "no consistency filter"
    )
    per_row = ", ".join(f"{k}: {v}" for k, v in mining["negatives_per_row"].items())
    lines = [
        "# anglekit adapt report",
        "",
        "## Queries",
        f"{q['kept']} queries kept of {q['candidates']} candidates for {q['documents_with_queries']} of {q['unique_documents']} documents "
        f"({q['queries_per_s']} queries/s over {q['generation_seconds']} s). Dropped by filter: {dropped}; {kept_by}.",
        "",
        "## Split",
        f"{report['split']['train_pairs']} training queries of {report['split']['train_documents']} documents; "
        f"{report['split']['dev_queries']} dev queries of {report['split']['dev_documents']} held-out documents.",
        "",
        "## Mining",
        f"{mining['rows']} of {mining['pairs']} queries got {mining['num_negatives']} negatives (rows by negatives found: {per_row}); "
        f"skipped candidates: {mining['skipped'] or 'none'}; {mining['seconds']['total']} s.",
    ]
    if teacher:
        s = teacher["scores"]
        lines += [
            "",
            "## Teacher",
            f"{teacher['name']} ({teacher['kind']}-encoder, {teacher.get('score', 'score')}, max length {teacher['max_length']}): {teacher['pairs_scored']} pairs in {teacher['seconds']} s; "
            f"guard {teacher['guard'] or 'none'} dropped {teacher['guard_dropped'].get('total', 0) if teacher['guard_dropped'] else 0}.",
            "",
            "| scores | mean | std | min | max |",
            "|---|---:|---:|---:|---:|",
            *(
                f"| {k} | {_stat(s[k], 'mean')} | {_stat(s[k], 'std')} | {_stat(s[k], 'min')} | {_stat(s[k], 'max')} |"
                for k in ("positive", "negative", "difference")
            ),
        ]
    lines += [
        "",
        "## Training",
        f"{training['steps']} steps, {training['pairs_per_second']:.1f} rows/s ({training['precision']}); model: {training['model_dir']}",
        "",
        "## Scores",
        data,
        "## Stages",
        "",
        "| stage | status | seconds | command |",
        "|---|---|---:|---|",
        *(f"| {name} | {s['status']} | {s['seconds']} | `{s['command']}` |" for name, s in report["stages"].items()),
    ]
    return "\n".join(lines) + "\n"


__all__ = ["SHOWN", "build_report", "report_markdown"]
