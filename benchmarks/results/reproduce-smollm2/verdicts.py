"""Issue 30: a verdict per claim of Table 4 and of Table 2's LLM block, from the smollm2 cells
(run_cells.py: 30 steps, seeds 0 1 2, every row on the same budget) in runs/repro-smollm2/cells.

    ANGLEKIT_DATA=../shared/data .venv/bin/python benchmarks/results/reproduce-smollm2/verdicts.py

Writes verdicts.json and verdicts.md beside this script. A claim is *confirmed* when the row it
favours is higher on the paired t-test over the three seeds (p < 0.05), *contradicted* when it is
significantly lower, else *not confirmed (within noise)*; never on one seed.
"""

from __future__ import annotations

import json
from pathlib import Path

from anglekit.reproduce.cells import read_cell
from anglekit.reproduce.stats import mean_std, paired

HERE = Path(__file__).resolve().parent
CELLS = Path("runs/repro-smollm2/cells")
METRIC = "STS-B test"
ROWS = ("zero-shot (no training)", "all: cosine + ibn + angle", "without angle", "only cosine", "only ibn", "only angle")
PUBLISHED = {  # Table 4 (AnglE-BERT, STS-B test); Table 2's LLM block, STS-B column (transfer from NLI)
    "all: cosine + ibn + angle": 86.26, "without angle": 85.30, "only cosine": 85.28, "only ibn": 72.48, "only angle": 85.15,
}  # fmt: skip
CLAIMS = [
    ("Table 4: the angle term helps", "all: cosine + ibn + angle", "without angle", 86.26 - 85.30),
    ("Table 4: in-batch negatives help (cosine + ibn over cosine alone)", "without angle", "only cosine", 85.30 - 85.28),
    ("Table 4: the full objective beats only cosine", "all: cosine + ibn + angle", "only cosine", 86.26 - 85.28),
    ("Table 4: the full objective beats only ibn", "all: cosine + ibn + angle", "only ibn", 86.26 - 72.48),
    ("Table 4: the full objective beats only angle", "all: cosine + ibn + angle", "only angle", 86.26 - 85.15),
    ("Table 2: AnglE over contrastive (InfoNCE) on the same LLM", "all: cosine + ibn + angle", "only ibn", 88.97 - 87.86),
]


def values() -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {row: {} for row in ROWS}
    for path in sorted(CELLS.glob("*.json")):
        record = read_cell(path)
        if record and record.get("status") == "done" and record["row"] in out and METRIC in record["metrics"]:
            out[record["row"]][record["seed"] if record["seed"] is not None else 0] = float(record["metrics"][METRIC])
    return out


def verdict(p: object, favoured_higher: bool) -> str:
    if p is None or len(p.seeds) < 2:
        return "no verdict (one seed)"
    if p.within_noise:
        return f"not confirmed (within noise, p={p.p:.2f})" if p.p is not None else "not confirmed (no spread)"
    return f"confirmed (p={p.p:.3f})" if favoured_higher else f"contradicted (p={p.p:.3f})"


def main() -> None:
    data = values()
    rows = []
    for row in ROWS:
        vals = data[row]
        m, sd = mean_std(list(vals.values())) if vals else (None, None)
        rows.append({"row": row, "values": vals, "mean": m, "std": sd, "published": PUBLISHED.get(row)})
    claims = []
    for claim, better, worse, published in CLAIMS:
        p = paired(data[better], data[worse])
        claims.append({
            "claim": claim, "row": better, "against": worse, "seeds": list(p.seeds) if p else [],
            "mean_diff": p.mean_diff if p else None, "std_diff": p.std_diff if p else None, "p": p.p if p else None,
            "published_diff": round(published, 2), "verdict": verdict(p, bool(p and p.mean_diff > 0)),
        })  # fmt: skip
    (HERE / "verdicts.json").write_text(json.dumps({"metric": METRIC, "rows": rows, "claims": claims}, indent=2) + "\n", encoding="utf-8")
    lines = ["| row | STS-B test (mean ± std, 3 seeds) | per seed | paper (AnglE-BERT) |", "|---|---|---|---|"]
    for r in rows:
        spread = f" ± {r['std']:.2f}" if r["std"] is not None else ""
        seeds = ", ".join(f"{v:.2f}" for _, v in sorted(r["values"].items()))
        lines.append(f"| {r['row']} | {r['mean']:.2f}{spread} | {seeds} | {r['published'] if r['published'] is not None else '-'} |")
    lines += ["", "| claim | comparison | difference (mean ± std, paired) | paper | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        diff = f"{c['mean_diff']:+.2f} ± {c['std_diff']:.2f}" if c["std_diff"] is not None else "-"
        lines.append(f"| {c['claim']} | {c['row']} vs {c['against']} | {diff} | {c['published_diff']:+.2f} | {c['verdict']} |")
    (HERE / "verdicts.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
