"""The README's and the docs' code blocks and figures cannot rot.

- Every fenced ``python`` block compiles; every ``anglekit ...`` command of a ``bash`` block parses
  against the real argparse parser (the command and its flags exist, values of typed flags parse).
- Every figure marked ``<!--fig:KEY-->VALUE<!--/fig-->`` equals what ``benchmarks/make_results.py``
  reads from the results file of KEY's claim, and docs/results.md and its charts are up to date.
- ``slow``: the runnable pages' blocks (:data:`RUNNABLE`) run, in order, offline, on a tiny random
  model and the shipped data (:data:`SUBSTITUTIONS`). A block that cannot run offline carries
  ``<!-- no-run: REASON -->`` on the line before it; those are counted and reported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import helpers

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNNABLE = [ROOT / "README.md", ROOT / "docs" / "get-started.md"]
"""Pages whose blocks the slow pass runs (the newcomer's path); the others are compiled and parsed."""
NO_RUN = re.compile(r"<!--\s*no-run(?::\s*(?P<reason>.*?))?\s*-->")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)[^\n]*$")
SHELL = {"bash", "sh", "shell", "console"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    code: str
    no_run: str | None

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks_of(text: str, page: Path) -> list[Block]:
    """The fenced blocks of a markdown text, each with the reason of a ``no-run`` marker right above it.

    A ``no-run`` marker without a reason, or one not followed by a block, is an error (ValueError
    naming the page and line)."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    pending: tuple[int, str] | None = None
    while i < len(lines):
        marker = NO_RUN.search(lines[i])
        if marker:
            if not (marker.group("reason") or "").strip():
                raise ValueError(f"{page}:{i + 1}: a no-run marker needs a reason: <!-- no-run: WHY -->")
            pending = (i, marker.group("reason").strip())
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if fence:
            start = i
            close = re.compile(rf"^ *{re.escape(fence.group('fence'))}\s*$")
            i += 1
            body = []
            while i < len(lines) and not close.match(lines[i]):
                body.append(lines[i][len(fence.group("indent")) :])
                i += 1
            reason = pending[1] if pending and pending[0] == start - 1 else None
            if pending and reason is None:
                raise ValueError(f"{page}:{pending[0] + 1}: a no-run marker must be the line right before its code block")
            pending = None
            out.append(Block(page, start + 1, fence.group("lang").lower(), "\n".join(body) + "\n", reason))
        elif pending and lines[i].strip():
            raise ValueError(f"{page}:{pending[0] + 1}: a no-run marker must be the line right before its code block")
        i += 1
    if pending:
        raise ValueError(f"{page}:{pending[0] + 1}: a no-run marker with no code block after it")
    return out


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks_of(page.read_text(encoding="utf-8"), page)]


def shell_commands(code: str) -> list[list[str]]:
    """The simple commands of a shell block: continuations joined, comments dropped, split at ``&&``, ``||``, ``;``, ``|``."""
    joined = re.sub(r"\\\n", " ", code)
    commands: list[list[str]] = []
    for line in joined.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for token in lexer:
            if token in {"&&", "||", ";", "|", "&"}:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
        if current:
            commands.append(current)
    return commands


def anglekit_argv(command: list[str]) -> list[str] | None:
    """The arguments after ``anglekit`` (or ``.venv/bin/anglekit``, ``python -m anglekit``), else None."""
    while command and re.fullmatch(r"[A-Z_]+=.*", command[0]):  # VAR=value prefixes
        command = command[1:]
    if command and command[0].rsplit("/", 1)[-1] == "anglekit":
        return command[1:]
    if len(command) >= 3 and command[0].rsplit("/", 1)[-1].startswith("python") and command[1:3] == ["-m", "anglekit"]:
        return command[3:]
    return None


def load_make_results():
    spec = importlib.util.spec_from_file_location("make_results", ROOT / "benchmarks" / "make_results.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_results"] = module
    spec.loader.exec_module(module)
    return module


# Block parsing ------------------------------------------------------------------------------------


def test_blocks_of_reads_fences_and_markers() -> None:
    text = "intro\n\n<!-- no-run: needs the hub -->\n```bash\nanglekit train x\n```\n\n```python\nprint(1)\n```\n"
    blocks = blocks_of(text, Path("page.md"))
    assert [(b.lang, b.no_run, b.line) for b in blocks] == [("bash", "needs the hub", 4), ("python", None, 8)]
    assert blocks[0].code == "anglekit train x\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- no-run -->\n```bash\nx\n```\n", "needs a reason"),
        ("<!-- no-run:   -->\n```bash\nx\n```\n", "needs a reason"),
        ("<!-- no-run: why -->\nsome text\n```bash\nx\n```\n", "right before its code block"),
        ("text\n<!-- no-run: why -->\n", "no code block after it"),
    ],
)
def test_blocks_of_rejects_bad_markers(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        blocks_of(text, Path("page.md"))
    assert "page.md:" in str(info.value)


def test_shell_commands_split_and_strip_comments() -> None:
    code = 'export A=1   # comment\nanglekit eval m --data "a b" && anglekit report x \\\n  y | tee out  # c\n'
    assert shell_commands(code) == [["export", "A=1"], ["anglekit", "eval", "m", "--data", "a b"], ["anglekit", "report", "x", "y"], ["tee", "out"]]
    assert anglekit_argv(["HF_HUB_OFFLINE=1", ".venv/bin/anglekit", "eval", "m"]) == ["eval", "m"]
    assert anglekit_argv([".venv/bin/python", "-m", "anglekit", "serve", "m"]) == ["serve", "m"]
    assert anglekit_argv(["bash", "scripts/test.sh"]) is None


# Every page's blocks ------------------------------------------------------------------------------


def test_pages_have_blocks_and_valid_markers() -> None:
    blocks = all_blocks()  # raises on a malformed marker, naming the page and line
    assert sum(b.lang == "python" for b in blocks) >= 10
    assert sum(b.lang in SHELL for b in blocks) >= 20


def test_python_blocks_compile() -> None:
    failures = []
    for block in all_blocks():
        if block.lang in {"python", "py"}:
            try:
                compile(block.code, str(block), "exec")
            except SyntaxError as exc:
                failures.append(f"{block}: {exc.msg} (block line {exc.lineno})")
    assert not failures, "\n".join(failures)


def test_anglekit_commands_parse(capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import build_parser

    parser = build_parser()
    failures, parsed = [], 0
    for block in all_blocks():
        if block.lang not in SHELL:
            continue
        for command in shell_commands(block.code):
            argv = anglekit_argv(command)
            if argv is None or not argv or argv[0] in {"--help", "-h", "--version"} or "--help" in argv:
                continue
            try:
                parser.parse_args(argv)
                parsed += 1
            except SystemExit as exc:
                err = capsys.readouterr().err.strip().splitlines()
                failures.append(f"{block}: anglekit {shlex.join(argv)}: exit {exc.code}: {err[-1] if err else ''}")
    assert not failures, "\n".join(failures)
    assert parsed >= 30, f"only {parsed} anglekit commands found in the pages"


def test_the_command_table_lists_every_command() -> None:
    """docs/cli.md's table of commands names each command ``anglekit --help`` lists, and no other."""
    from anglekit.cli import COMMANDS

    commands = {module.NAME for module in COMMANDS}
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `anglekit ([a-z-]+)`", text, re.M)) | set(re.findall(r"^\| `anglekit [a-z-]+` / `anglekit ([a-z-]+)`", text, re.M))
    assert listed == set(commands)


def test_no_run_markers_are_counted() -> None:
    """The reasons are reported (pytest -rA shows them); a runnable page without any block to run is an error."""
    for page in RUNNABLE:
        blocks = blocks_of(page.read_text(encoding="utf-8"), page)
        skipped = [b for b in blocks if b.no_run]
        runnable = [b for b in blocks if not b.no_run]
        print(
            f"{page.relative_to(ROOT)}: {len(runnable)} blocks run, {len(skipped)} marked no-run: " + "; ".join(f"line {b.line}: {b.no_run}" for b in skipped)
        )
        assert runnable, f"{page}: no block left to run"


# Figures ------------------------------------------------------------------------------------------


def test_marked_figures_match_their_results_files() -> None:
    make_results = load_make_results()
    figures = make_results.resolve()
    failures, seen = [], 0
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in make_results.MARKER.finditer(text):
            key, shown = match.group(1), match.group(2)
            line = text.count("\n", 0, match.start()) + 1
            seen += 1
            if key not in figures:
                failures.append(f"{page.relative_to(ROOT)}:{line}: no claim {key!r} in benchmarks/make_results.py")
            elif shown != figures[key]:
                failures.append(f"{page.relative_to(ROOT)}:{line}: {key} shows {shown!r}, its results file gives {figures[key]!r}")
        # A marker the pattern does not read (a typo, a missing close) would leave its figure unchecked.
        for stray in re.finditer(r"<!--\s*/?\s*fig\b", make_results.MARKER.sub("", text)):
            failures.append(f"{page.relative_to(ROOT)}: a figure marker that is not <!--fig:KEY-->VALUE<!--/fig--> near {stray.group(0)!r}")
    assert not failures, "\n".join(failures)
    assert seen >= 20
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "fig:quickstart.after" in readme and "fig:train.x_st_best" in readme


def test_readme_results_rows_carry_their_runs_dates() -> None:
    make_results = load_make_results()
    claims = {claim.key: claim for claim in make_results.claims()}
    results = make_results.Results(make_results.RESULTS)
    rows = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("|") and "<!--fig:" in line]
    assert len(rows) >= 8
    for row in rows:
        for key in make_results.MARKER.findall(row):
            date = claims[key[0]].run_date(results)
            assert f"| {date} |" in row, f"README row of {key[0]} should give its run's date {date}: {row}"


def test_results_page_and_charts_are_current() -> None:
    make_results = load_make_results()
    assert make_results.main(["--check"]) == 0, "run: .venv/bin/python benchmarks/make_results.py"
    for png in (ROOT / "docs" / make_results.IMG).glob("*.png"):
        assert png.stat().st_size < 100_000, f"{png}: keep charts under 100 KB"


def test_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


# make_results.py on bad input ---------------------------------------------------------------------


def _results_copy(tmp_path: Path) -> Path:
    """A copy of the results files the claims read (small JSON only) and of the run.sh files that say
    what produced them, to break one at a time."""
    make_results = load_make_results()
    dest = tmp_path / "results"
    sources = set()
    for claim in make_results.claims():
        sources.add(claim.source)
    sources |= {f"llm-lora-numpy-masks/run{i}-{kind}.json" for i in (1, 2, 3, 4) for kind in ("default", "fp32-reference")}
    sources |= {"gpu/varlen-4bit/train_bf16.json", "gpu/varlen-4bit/lora_bf16.json", "train-minilm-loop-levers-xeon-amx/bench_train.json"}
    sources |= {script.relative_to(make_results.RESULTS).as_posix() for name in make_results.RUN_SCRIPTS for script in make_results.RESULTS.rglob(name)}
    for source in sources:
        target = dest / source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((make_results.RESULTS / source).read_bytes())
    return dest


def test_a_claim_cannot_keep_a_date_by_hand_once_its_results_file_records_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A benchmark run again writes its date: the claim's literal date would be stale, so it is an error."""
    make_results = load_make_results()
    results = _results_copy(tmp_path)
    claim = next(c for c in make_results.claims() if not c.date.startswith("@") and c.source == "bench_unsup.json")
    target = results / claim.source
    target.write_text(json.dumps({**json.loads(target.read_text(encoding="utf-8")), "date": "2027-01-02"}), encoding="utf-8")
    docs = tmp_path / "docs"
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs)]) == 2
    err = capsys.readouterr().err.strip()
    assert "bench_unsup.json: records its run's date ('2027-01-02')" in err and "date='@date'" in err, err
    assert not docs.exists()


@pytest.mark.parametrize(
    ("source", "content", "message"),
    [
        ("bench_unsup.json", "", "bench_unsup.json: empty file"),
        ("bench_unsup.json", "{not json", "bench_unsup.json: not JSON"),
        ("bench_unsup.json", b"\xff\xfe\x00binary", "bench_unsup.json: cannot be read as UTF-8"),
        ("bench_unsup.json", '{"summary": []}', "bench_unsup.json: field 'summary[method=simace-unsup].stsb_test_mean': 0 items with method = 'simace-unsup'"),
        ("bench_unsup.json", '{"summary": [{"method": "simace-unsup", "stsb_test_mean": "80", "stsb_test_std": 1}]}', "is '80', not a number"),
        ("bench_search.json", "[1, 2]", "bench_search.json: no field 'rows.hnsw.queries_per_s'"),
        ("quickstart/quickstart.json", None, "quickstart.json: no such results file"),
        ("quickstart/quickstart.json", '{"date": "yesterday"}', "quickstart.json: no field 'before.spearman'"),
        (
            "serve-vs-infinity-ov-pad8/summary.json",
            '{"cells": [{"runs": [{"ratio": 2.0}]}]}',
            "cells[0].runs must be a non-empty list of runs with numeric anglekit_sps",
        ),
        ("serve-vs-infinity-ov-pad8/summary.json", '{"cells": {}}', "summary.json: field 'cells' is not a non-empty list"),
        (
            "angle-term-worth/smollm2/ese.json",
            '{"rows": []}',
            "ese.json: field 'rows[row=AnglE + ESE (k = 128, T = 1.0)].paired_other.STS-B test.mean_diff': 0 items",
        ),
        (
            "angle-term-worth/smollm2/ese.json",
            json.dumps(
                {
                    "rows": [
                        {
                            "row": "AnglE + ESE (k = 128, T = 1.0)",
                            "paired_other": {"STS-B test": {"mean_diff": -1.0, "std_diff": 0.1, "p": 0.2, "seeds": [0, 1]}},
                        }
                    ]
                }
            ),
            "ese.json: field 'rows[row=AnglE + ESE (k = 128, T = 1.0)].paired_other.STS-B test.seeds' is [0, 1], not 3 seeds or more",
        ),
    ],
)
def test_make_results_names_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str, content: str | bytes | None, message: str
) -> None:
    make_results = load_make_results()
    results = _results_copy(tmp_path)
    target = results / source
    if content is None:
        target.unlink()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content, encoding="utf-8")
    docs = tmp_path / "docs"
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("make_results: error: ") and message in err, err
    assert not docs.exists(), "nothing may be written when a results file is bad"


def test_a_selector_may_name_several_keys(tmp_path: Path) -> None:
    """``[a=X&b=Y]`` picks the one item matching every key (a value may hold brackets and ``=``);
    none or several matching, or a condition without ``=``, is an error naming the field."""
    make_results = load_make_results()
    pairs = [{"a": "p[w=4]:m", "b": "x", "v": 1.0}, {"a": "p[w=4]:m", "b": "y", "v": 2.0}, {"a": "q", "b": "x", "v": 3.0}]
    (tmp_path / "f.json").write_text(json.dumps({"pairs": pairs}), encoding="utf-8")
    results = make_results.Results(tmp_path)
    assert results.number("f.json", "pairs[a=p[w=4]:m&b=y].v") == 2.0
    assert results.number("f.json", "pairs[b=x&a=q].v") == 3.0
    with pytest.raises(make_results.ResultsError, match=r"'pairs\[a=p\[w=4\]:m\]\.v': 2 items with a = 'p\[w=4\]:m', expected 1"):
        results.number("f.json", "pairs[a=p[w=4]:m].v")
    with pytest.raises(make_results.ResultsError, match="0 items with a = 'q' and b = 'y', expected 1"):
        results.number("f.json", "pairs[a=q&b=y].v")
    with pytest.raises(make_results.ResultsError, match=r"a selector is KEY=VALUE\[&KEY=VALUE...\]"):
        results.number("f.json", "pairs[a=q&b].v")


def test_make_results_writes_then_checks(tmp_path: Path) -> None:
    make_results = load_make_results()
    results, docs = _results_copy(tmp_path), tmp_path / "docs"
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs), "--check"]) == 1  # nothing there yet
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs)]) == 0
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs), "--check"]) == 0
    page = (docs / "results.md").read_text(encoding="utf-8")
    # The page's figure is the file's (an independent read of the JSON).
    unsup = json.loads((results / "bench_unsup.json").read_text())
    simace = next(s for s in unsup["summary"] if s["method"] == "simace-unsup")
    assert f"**{simace['stsb_test_mean']:.2f} ± {simace['stsb_test_std']:.2f}**" in page
    # A changed result makes the page and the charts stale.
    levers = json.loads((results / "train-minilm-loop-levers-xeon-amx/bench_train.json").read_text())
    levers["rows"][0]["spearman_runs"][0] += 1.0
    (results / "train-minilm-loop-levers-xeon-amx/bench_train.json").write_text(json.dumps(levers))
    assert make_results.main(["--results-dir", str(results), "--docs-dir", str(docs), "--check"]) == 1
    assert not list(docs.rglob("*.tmp"))


def test_history_hook_rewrites_links() -> None:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("the docs extra is not installed")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.history_markdown("# Benchmarks\n\nSee [gpu](../docs/gpu.md#results) and [x](https://e.org).\n")
    assert page.startswith("# Benchmark history\n") and "# Benchmarks\n" not in page
    assert "[gpu](gpu.md#results)" in page and "[x](https://e.org)" in page
    assert (
        hooks.site_links("[a](../benchmarks/README.md) [b](../benchmarks/README.md#training) [c](x.md)") == "[a](history.md) [b](history.md#training) [c](x.md)"
    )
    assert hooks.site_links("![w](../benchmarks/results/angle-term-worth/minilm/angle-weight.png) [j](../benchmarks/results/x.json)") == (
        "![w](results-files/angle-term-worth/minilm/angle-weight.png) [j](../benchmarks/results/x.json)"
    )
    # Every chart a docs page shows is a file under benchmarks/results/, which the hook publishes.
    shown = {m for page in (ROOT / "docs").glob("*.md") for m in re.findall(r"\]\(\.\./benchmarks/results/([^)\s]+\.png)\)", page.read_text(encoding="utf-8"))}
    assert {"angle-term-worth/minilm/angle-weight.png", "angle-term-worth/minilm/ese.png"} <= shown
    assert all((ROOT / "benchmarks" / "results" / name).is_file() for name in shown)


# Running the newcomer's pages ---------------------------------------------------------------------

SUBSTITUTIONS = {
    # The quick start's model is swapped for a tiny random BERT and its epoch for 2 steps: the
    # commands, flags, data and files are the real ones.
    "pypi:all-minilm-l6-v2": "{tiny}",
    # The server listens on a free port instead of 8000.
    "--port 8000": "--port {port}",
    "127.0.0.1:8000": "127.0.0.1:{port}",
}


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "stsb").is_dir(), reason="../shared/data not present")
def test_runnable_pages_run_offline(tmp_path: Path) -> None:
    tiny = helpers.build_tiny_bert(tmp_path / "tiny")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    work = tmp_path / "work"
    work.mkdir()
    (work / "configs").mkdir()
    for config in (ROOT / "configs").glob("*.yaml"):  # the same settings, the tiny model
        text = config.read_text(encoding="utf-8")
        for old, new in SUBSTITUTIONS.items():
            text = text.replace(old, new.format(tiny=tiny, port=port))
        (work / "configs" / config.name).write_text(text, encoding="utf-8")
    env = {
        **os.environ,
        "ANGLEKIT_DATA": str(DATA),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "ANGLEKIT_AUTO_BF16": "0",
    }
    anglekit = f"{sys.executable} -m anglekit"
    servers: list[subprocess.Popen[str]] = []

    def run(code: str, where: str, lang: str) -> None:
        for old, new in SUBSTITUTIONS.items():
            code = code.replace(old, new.format(tiny=tiny, port=port))
        if lang in SHELL and re.match(r"\s*anglekit serve ", code):
            # A server runs until stopped: started here, ready once /health says so, stopped at the end.
            log = (tmp_path / "serve.log").open("w")
            servers.append(
                subprocess.Popen(
                    ["bash", "-c", "exec " + code.strip().replace("anglekit", anglekit, 1)], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
                )
            )
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                assert servers[-1].poll() is None, f"{where}: the server exited: {(tmp_path / 'serve.log').read_text()[-2000:]}"
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                        if answer.status == 200:
                            return
                except OSError:
                    time.sleep(1)
            raise AssertionError(f"{where}: the server was not ready in 300 s")
        if lang in SHELL:
            code = re.sub(r"(?m)^(\s*)anglekit ", rf"\1{anglekit} ", code)
            code = re.sub(r"(?m)^(\s*\S+ -m anglekit train .*?)(\s*#.*)?$", r"\1 --max-steps 2 --quiet\2", code)
            argv = ["bash", "-euo", "pipefail", "-c", code]
        else:
            argv = [sys.executable, "-c", code]
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{where} failed (exit {done.returncode}):\n{code}\n{done.stderr[-3000:]}"

    # The quick start itself (marked no-run: minutes of training) in its short form, so that the
    # pages' later blocks find runs/quickstart/model as a reader would.
    run("anglekit train --config configs/quickstart.yaml --overwrite-output-dir", "scripts/quickstart.sh (short)", "bash")
    ran, skipped = 0, []
    try:
        for page in RUNNABLE:
            for block in blocks_of(page.read_text(encoding="utf-8"), page):
                if block.no_run:
                    skipped.append(f"{block}: {block.no_run}")
                    continue
                if block.lang in SHELL | {"python", "py"}:
                    run(block.code, str(block), block.lang)
                    ran += 1
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=60)
    assert servers, "the pages' server block did not run"
    print(f"ran {ran} blocks; {len(skipped)} marked no-run:\n" + "\n".join(skipped))
    assert ran >= 5
    assert (work / "runs" / "quickstart-lr3e-5" / "model").is_dir()
    assert json.loads((work / "scores.json").read_text())
