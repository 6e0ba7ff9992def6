"""Every figure traceable to a command: each results file under benchmarks/results records the
command that produced it (a run.sh in its folder or above, or its own ``command`` field), each claim
on docs/results.md shows it, and every results path the docs and scripts name exists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import helpers

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _make_results():
    return helpers.load_benchmark("make_results")


def test_every_results_file_records_its_command() -> None:
    assert _make_results().check_commands(RESULTS) == []


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_check_commands_names_each_file_without_one(tmp_path: Path) -> None:
    make_results = _make_results()
    results = tmp_path / "results"
    # Recorded: a run.sh above the file, a command field, a reasoned "not recorded", a log named after its JSON.
    _write(results / "ran/run.sh", "#!/usr/bin/env bash\n.venv/bin/python benchmarks/bench_x.py\n")
    _write(results / "ran/deeper/cell.json", "{}")
    _write(results / "ran/deeper/metrics.jsonl", "{}\n")
    _write(results / "unknown/run.sh", f"#!/usr/bin/env bash\n# what is known\n{make_results.NOT_RECORDED}\nexit 1\n")
    _write(results / "unknown/a.json", "{}")
    _write(results / "own/b.json", json.dumps({"command": ".venv/bin/python benchmarks/bench_b.py --n 3"}))
    _write(results / "bench_c.json", json.dumps({"command": ".venv/bin/python benchmarks/bench_c.py"}))
    _write(results / "bench_c-run.log", "log\n")
    _write(results / "bench_d.json", json.dumps({"command": None, "command_not_recorded": "an old run; its arguments were not noted"}))
    # Not recorded: no run.sh and no field, an empty or null command without a reason, an orphan log, a folder's non-JSON file.
    _write(results / "bare/e.json", json.dumps({"rows": []}))
    _write(results / "bench_f.json", json.dumps({"command": ""}))
    _write(results / "bench_g.json", json.dumps({"command": None}))
    _write(results / "orphan-run.log", "log\n")
    _write(results / "bare/notes.txt", "notes\n")
    _write(results / "bench_h.json", "[1, 2]")
    problems = make_results.check_commands(results)
    named = sorted(Path(problem.split(":", 1)[0]).relative_to(results).as_posix() for problem in problems)
    assert named == ["bare/e.json", "bare/notes.txt", "bench_f.json", "bench_g.json", "bench_h.json", "orphan-run.log"], problems
    assert all("run.sh" in problem or "named after" in problem for problem in problems), problems
    # What each recorded file shows on the page.
    assert make_results.producing_command(results, "ran/deeper/cell.json") == ("bash benchmarks/results/ran/run.sh", "benchmarks/results/ran/run.sh")
    assert make_results.producing_command(results, "unknown/a.json") == (None, "see `benchmarks/results/unknown/run.sh`")
    assert make_results.producing_command(results, "own/b.json")[0] == ".venv/bin/python benchmarks/bench_b.py --n 3"
    assert make_results.producing_command(results, "bench_d.json") == (None, "an old run; its arguments were not noted")


def test_a_run_sh_wins_over_the_command_a_file_measured(tmp_path: Path) -> None:
    """quickstart.json's "command" is the quick start it timed; the folder's run.sh is what wrote the file."""
    make_results = _make_results()
    _write(tmp_path / "quickstart/run.sh", "#!/usr/bin/env bash\n.venv/bin/python benchmarks/bench_quickstart.py\n")
    _write(tmp_path / "quickstart/quickstart.json", json.dumps({"command": "bash scripts/quickstart.sh"}))
    assert make_results.producing_command(tmp_path, "quickstart/quickstart.json")[0] == "bash benchmarks/results/quickstart/run.sh"


def test_every_claim_shows_its_command_beside_its_figure() -> None:
    make_results = _make_results()
    page = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    results = make_results.Results(RESULTS)
    for claim in make_results.claims():
        command, why = make_results.producing_command(RESULTS, claim.source)
        assert command is not None, f"{claim.key}: {claim.source}'s command is not recorded ({why})"
        row = next(line for line in page.splitlines() if line.startswith(f"| {claim.what} | **{claim.value(results)}** |"))
        assert f"| `benchmarks/results/{claim.source}` | `{command}` |" in row, row
        script = re.fullmatch(r"bash (benchmarks/results/\S+)", command)
        if script:  # a folder's run.sh: it exists and is no placeholder
            assert (ROOT / script.group(1)).is_file() and make_results.NOT_RECORDED not in (ROOT / script.group(1)).read_text(encoding="utf-8")


def test_make_results_refuses_a_claim_whose_file_records_no_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_results = _make_results()
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results, ignore=shutil.ignore_patterns("*.png", "*.jsonl", "*.log", "*.txt", "*.md"))
    (results / "quickstart" / "run.sh").unlink()
    quick = results / "quickstart" / "quickstart.json"
    quick.write_text(json.dumps({k: v for k, v in json.loads(quick.read_text(encoding="utf-8")).items() if k != "command"}), encoding="utf-8")
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(tmp_path / "docs")]) == 2
    err = capsys.readouterr().err
    assert "quickstart.json: records no command" in err, err
    assert not (tmp_path / "docs").exists()


def _ignored(path: str) -> bool:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return False
    return any(subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT).returncode == 0 for name in (path, path + "/"))


def test_results_paths_named_in_docs_and_scripts_exist() -> None:
    """A renamed or removed results folder leaves no reference behind (docs, lab notes, run.sh files, scripts)."""
    texts = [*ROOT.glob("docs/*.md"), ROOT / "README.md", ROOT / "benchmarks" / "README.md", *ROOT.glob("benchmarks/*.py"), *RESULTS.rglob("run*.sh")]
    missing = set()
    for text_file in texts:
        text = text_file.read_text(encoding="utf-8")
        for match in re.finditer(r"benchmarks/results/([A-Za-z0-9_./-]*[A-Za-z0-9_-])", text):
            name = match.group(1)
            if text[match.end() : match.end() + 1] in "{*<$" or "..." in name:  # a pattern, not a path
                continue
            if not (RESULTS / name).exists() and not _ignored(f"benchmarks/results/{name}"):
                missing.add(f"{text_file.relative_to(ROOT)}: benchmarks/results/{name}")
    assert not missing, sorted(missing)


def test_a_benchmark_records_the_command_it_ran() -> None:
    """What the benchmarks write into their results' ``command`` field (peers/common.invocation)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_common", ROOT / "benchmarks" / "peers" / "common.py")
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = common
    spec.loader.exec_module(common)
    script = str(ROOT / "benchmarks" / "bench_mine.py")
    assert common.invocation([script, "--rows", "2000", "--note", "idle: run paused"]) == (
        ".venv/bin/python benchmarks/bench_mine.py --rows 2000 --note 'idle: run paused'"
    )
    assert common.invocation(["/elsewhere/x.py"]) == ".venv/bin/python /elsewhere/x.py"
