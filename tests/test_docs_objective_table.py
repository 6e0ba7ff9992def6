"""docs/training.md's "Which objective fits your data" table is true to the objective registry:
every registered preset is named, and each row names only presets whose batch kind takes that data."""

from __future__ import annotations

import re
from pathlib import Path

from anglekit.losses.registry import all_presets, objective_config, preset_batch_kind

ROOT = Path(__file__).resolve().parents[1]
KINDS = {
    "pairs with scores": {"pairs"},
    "pairs without scores": {"pairs", "triplets"},
    "triplets": {"pairs", "triplets"},
    "n-tuples": {"pairs", "triplets"},
    "n-tuples with teacher scores": {"pairs", "triplets", "scored"},
    "sentences only": {"sentences"},
}
"""The batch kinds whose presets can learn from each row's data (pair presets expand anchor/positive rows)."""


def table_rows() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    section = text.split("## Which objective fits your data\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("your data", "---"):
            continue
        data = re.sub(r"\s*\(.*", "", cells[0])
        named = set(re.findall(r"`([a-z0-9-]+)`", cells[2]))
        as_row = re.search(r"(?:^|; also )as ([a-z -]+?)(?::|$| \()", cells[2])  # "as triplets", "...; also as n-tuples (...)"
        if as_row:
            named |= rows[as_row.group(1).strip()]
        rows[data] = named & set(all_presets())
    return rows


def test_the_objective_table_names_every_preset_for_the_data_it_takes() -> None:
    rows = table_rows()
    assert set(rows) == set(KINDS)
    assert set().union(*rows.values()) == set(all_presets())
    for data, presets in rows.items():
        assert presets, data
        wrong = {name: preset_batch_kind(name) for name in presets if preset_batch_kind(name) not in KINDS[data]}
        assert not wrong, f"{data}: {wrong}"
    # Every pair preset learns from scored pairs; the unsupervised ones from sentences only.
    assert rows["pairs with scores"] == {name for name in all_presets() if preset_batch_kind(name) == "pairs"}
    assert rows["sentences only"] == {name for name in all_presets() if preset_batch_kind(name) == "sentences"}
    # Positives only: a pair preset learns from them through its in-batch term alone (the ranking
    # terms need two labels; anglekit train refuses those presets on one label).
    for name in rows["pairs without scores"]:
        if preset_batch_kind(name) == "pairs":
            assert objective_config(name).ibn_weight > 0, name
    assert {name for name in all_presets() if preset_batch_kind(name) == "pairs" and objective_config(name).ibn_weight > 0} <= rows["pairs without scores"]
    # The distillation presets read the teacher's score columns, so they learn from that row alone.
    scored = {name for name in all_presets() if preset_batch_kind(name) == "scored"}
    assert scored and scored <= rows["n-tuples with teacher scores"]
    assert not any(scored & presets for data, presets in rows.items() if data != "n-tuples with teacher scores")
