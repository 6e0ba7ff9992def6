"""anglekit adapt end to end on tiny inputs: a fake OpenAI-compatible LLM, tiny random BERTs as
student and teacher, 20 documents. The stages' files against the step commands' own outputs, the
report against the stage files, resume after an interruption, changed settings refused, bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "generation"))
from test_generation_fakeserver import FakeOpenAIServer, Reply, numbered  # noqa: E402

from anglekit.adapt import AdaptConfig, run_adapt  # noqa: E402
from anglekit.adapt.stages import fingerprint  # noqa: E402
from anglekit.cli import main  # noqa: E402
from anglekit.errors import ConfigError, DataError, NothingGeneratedError  # noqa: E402

import helpers  # noqa: E402

SUBJECTS = ["dog", "cat", "man", "woman", "child", "bird", "horse", "girl", "boy", "car"]
PLACES = ["park", "street", "beach", "river", "field", "house", "road", "snow", "water", "grass"]
DOCUMENTS = [f"a {SUBJECTS[i % 10]} runs near the {PLACES[(3 * i) % 10]} {'today' if i < 10 else 'at night'}" for i in range(20)]


def _questions(body: dict[str, Any], n: int) -> Reply:
    prompt = body["messages"][-1]["content"]
    document = next(d for d in DOCUMENTS if d in prompt)
    words = document.split()
    return Reply(content=numbered([f"where does the {words[1]} run {words[-1]}", f"what runs near the {words[5]}", f"is the {words[1]} near a {words[5]}"]))


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.build_tiny_bert(tmp_path_factory.mktemp("teacher") / "model", seed=7)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCUMENTS)), encoding="utf-8")
    return path


def _config(server: FakeOpenAIServer, student: Path, teacher: Path, corpus: Path, out: Path, **kwargs: Any) -> AdaptConfig:
    values: dict[str, Any] = dict(
        model=str(student), corpus=str(corpus), llm=f"openai:fake@{server.url}", teacher=str(teacher), output_dir=str(out), filter_top_k=20,
        dev_fraction=0.2, num_negatives=2, relative_margin=None, teacher_max_ratio=None, batch_size=8, max_length=16, device="cpu",
        merge_weight=[0.5], quiet=True, generate_option={"backoff_base": 0.01, "timeout": 5.0},
    )  # fmt: skip
    values.update(kwargs)
    return AdaptConfig(**values)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_adapt_end_to_end_report_matches_the_stage_files(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server:
        result = run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out))
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report == json.loads(json.dumps(result.report))
    stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
    assert list(stages) == ["queries", "split", "mine", "eval-start", "train", "eval-trained", "merged-w0.5", "eval-merged-w0.5"]
    assert all(s["status"] == "done" for s in stages.values())
    assert stages["queries"]["command"].startswith("anglekit generate --kind queries --input ")
    # Queries: what the file holds is what the report counts; the summary's filter counts are the report's.
    queries = _lines(out / "queries.jsonl")
    summary = json.loads((out / "queries.jsonl.summary.json").read_text(encoding="utf-8"))
    assert report["queries"]["kept"] == len(queries) == summary["queries"]["total"]
    assert report["queries"]["dropped_by_filter"] == summary["filters"]
    assert report["queries"]["documents"] == 20 and {q["positive"] for q in queries} <= set(DOCUMENTS)
    # Split: the dev set's queries and the training pairs partition the queries; no dev document is trained on or mined.
    pairs = _lines(out / "pairs.jsonl")
    dev_queries = _lines(out / "dev" / "queries.jsonl")
    qrels = (out / "dev" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert len(pairs) + len(dev_queries) == len(queries) == report["split"]["train_pairs"] + report["split"]["dev_queries"]
    held = {line.split("\t")[1] for line in qrels}
    assert len(held) == report["split"]["dev_documents"] == 4  # 0.2 x 20 documents with queries
    assert not held & {p["doc_id"] for p in pairs}
    mining_corpus = {r["text"] for r in _lines(out / "corpus-train.jsonl")}
    held_texts = {DOCUMENTS[int(d[1:])] for d in held}
    assert not mining_corpus & held_texts and len(mining_corpus) == 16
    # Mining: the teacher's scores are in the file, and the report's statistics are theirs.
    mined = _lines(out / "mined.jsonl")
    assert report["mining"]["rows"] == len(mined) and all({"negative_1", "negative_2", "positive_score", "negative_2_score"} <= set(r) for r in mined)
    assert not {r["negative_1"] for r in mined} & held_texts
    positives = [r["positive_score"] for r in mined]
    assert report["teacher"]["scores"]["positive"]["mean"] == pytest.approx(sum(positives) / len(positives), abs=1e-4)
    assert report["teacher"]["name"] == str(teacher_dir)
    # Scores: the report's are the eval files', and the gain is their difference.
    for name in ("start", "trained", "merged-w0.5"):
        scores = json.loads((out / "eval" / name / "retrieval.json").read_text(encoding="utf-8"))["scores"]
        assert report["scores"][name] == pytest.approx(scores)
    assert report["gain"]["trained"]["ndcg@10"] == pytest.approx(report["scores"]["trained"]["ndcg@10"] - report["scores"]["start"]["ndcg@10"])
    assert (out / "train" / "model" / "config.json").is_file() and (out / "merged-w0.5" / "config.json").is_file()
    assert "## Teacher" in (out / "report.md").read_text(encoding="utf-8")


def test_the_merge_is_merge_models_of_the_same_folders(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    """The merged folder embeds as `anglekit merge START TRAINED --weight 0.5` does (a round trip through the step command)."""
    import numpy as np

    from anglekit.model.embedder import Embedder

    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server:
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out, dev_fraction=0.1))
    step = tmp_path / "step-merge"
    assert main(["merge", str(tiny_bert_dir), str(out / "train" / "model"), "--weight", "0.5", "--max-length", "16", "--output-dir", str(step), "--quiet"]) == 0
    a = Embedder.from_pretrained(str(out / "merged-w0.5"), device="cpu").encode(DOCUMENTS[:4])
    b = Embedder.from_pretrained(str(step), device="cpu").encode(DOCUMENTS[:4])
    np.testing.assert_array_equal(a, b)


class Boom(RuntimeError):
    pass


def test_resume_after_an_interruption_reuses_finished_stages_and_ends_the_same(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from anglekit.adapt import steps

    out = tmp_path / "run"
    real_train = steps.train

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(steps, "train", interrupted)
    with FakeOpenAIServer(_questions) as server:
        config = _config(server, tiny_bert_dir, teacher_dir, corpus, out)
        with pytest.raises(KeyboardInterrupt):
            run_adapt(config)
        stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
        assert {k: v["status"] for k, v in stages.items()} == {"queries": "done", "split": "done", "mine": "done", "eval-start": "done", "train": "interrupted"}
        assert not (out / "report.json").exists()
        before = {name: fingerprint(out / name) for name in ("queries.jsonl", "pairs.jsonl", "mined.jsonl")}
        mtimes = {name: (out / name).stat().st_mtime_ns for name in before}
        asked = len(server.ok())
        monkeypatch.setattr(steps, "train", real_train)
        said: list[str] = []
        run_adapt(config, say=said.append)
        assert len(server.ok()) == asked  # nothing asked again
    assert {name: (out / name).stat().st_mtime_ns for name in before} == mtimes
    assert sum("reused" in line for line in said) == 4 and not any(line.startswith("train: done before") for line in said)
    # The same files as a run that was never interrupted (its own folder and LLM cache).
    first = json.loads((out / "report.json").read_text(encoding="utf-8"))
    with FakeOpenAIServer(_questions) as server:
        whole = run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, tmp_path / "whole")).report
    for name in ("queries.jsonl", "pairs.jsonl"):  # the same rows but for the fake server's address in "llm"
        strip = lambda rows: [{k: v for k, v in r.items() if k != "llm"} for r in rows]  # noqa: E731
        assert strip(_lines(out / name)) == strip(_lines(tmp_path / "whole" / name)), name
    for name in ("mined.jsonl", "dev/qrels/test.tsv", "dev/queries.jsonl", "corpus-train.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
    assert list(whole["scores"]) == list(first["scores"]) and whole["training"]["steps"] == first["training"]["steps"]
    for name, scores in whole["scores"].items():
        assert scores == pytest.approx(first["scores"][name], abs=1e-6), name
    # A second full run rebuilds the same report from reused stages only.
    said.clear()
    run_adapt(config, say=said.append)
    assert sum("reused" in line for line in said) == 8
    again = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert again["scores"] == first["scores"] and again["queries"] == first["queries"]


def test_a_replaced_stage_output_reruns_only_the_stages_after_it(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server:
        config = _config(server, tiny_bert_dir, teacher_dir, corpus, out, merge_weight=None)
        run_adapt(config)
        mined = _lines(out / "mined.jsonl")
        (out / "mined.jsonl").write_text("".join(json.dumps(r) + "\n" for r in mined[: len(mined) // 2]), encoding="utf-8")
        said: list[str] = []
        report = run_adapt(config, say=said.append).report
    reused = {line.split(":")[0] for line in said if "reused" in line}
    assert reused == {"queries", "split", "mine", "eval-start"}
    assert report["training"]["steps"] == -(-(len(mined) // 2) // 8)  # one epoch of the shortened file, batch 8


def test_other_settings_on_an_existing_folder_are_refused_naming_them(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server:
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out, merge_weight=None))
        with pytest.raises(ConfigError, match=r"other settings: num_negatives \(2 then, 3 now\)"):
            run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out, merge_weight=None, num_negatives=3))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("mine", encoding="utf-8")
    with FakeOpenAIServer(_questions) as server, pytest.raises(ConfigError, match="not empty and holds no adapt run"):
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, tmp_path / "full"))
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["x.txt"]


def test_a_filter_that_keeps_nothing_fails_the_stage_naming_its_counts(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    out = tmp_path / "run"
    with (
        FakeOpenAIServer(lambda body, n: Reply(content=numbered(["x"]))) as server,  # one-word queries: all too short
        pytest.raises(NothingGeneratedError, match="kept none of the .* candidate queries"),
    ):
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out))
    stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
    assert stages["queries"]["status"] == "failed" and "kept none" in stages["queries"]["error"]
    assert not (out / "queries.jsonl").exists() and list(stages) == ["queries"]


@pytest.mark.parametrize(("content", "error", "needle"), [("", DataError, "docs.txt: file is empty"), ("\n  \n", DataError, "docs.txt: file is empty")])
def test_an_empty_corpus_is_refused(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, content: str, error: type, needle: str) -> None:
    path = tmp_path / "docs.txt"
    path.write_text(content, encoding="utf-8")
    with FakeOpenAIServer(_questions) as server:
        with pytest.raises(error, match=needle):
            run_adapt(_config(server, tiny_bert_dir, teacher_dir, path, tmp_path / "run"))
        assert server.ok() == []


def test_cli_one_line_errors_and_help(tmp_path: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["adapt", "m", "--corpus", str(corpus), "--llm", "x", "--teacher", "t"]) == 2
    assert "--output-dir required" in capsys.readouterr().err
    assert main(["adapt", "m", "--corpus", str(tmp_path / "none.txt"), "--llm", "x", "--teacher", "t", "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
    # A weight out of [0, 1], or NaN, is refused as the flag is parsed (argparse's exit 2).
    for bad, says in (("1.5", "must be <= 1, got 1.5"), ("nan", "got nan")):
        with pytest.raises(SystemExit) as parsed:
            main(["adapt", "m", "--corpus", str(corpus), "--llm", "x", "--teacher", "t", "--output-dir", str(tmp_path / "o"), "--merge-weight", bad])
        assert parsed.value.code == 2 and "argument --merge-weight" in (err := capsys.readouterr().err) and says in err
    for bad_weight in (1.5, float("nan")):  # the same check in the typed settings (Python, YAML)
        with pytest.raises(ConfigError, match="merge_weight"):
            AdaptConfig(model="m", corpus="c", llm="x", teacher="t", output_dir="o", merge_weight=[0.5, bad_weight])
    assert not (tmp_path / "o").exists()
    config = tmp_path / "adapt.yaml"
    config.write_text("model: m\ncorpus: c\nllm: x\nteacher: t\noutput-dir: o\nbogus: 1\n", encoding="utf-8")
    assert main(["adapt", "--config", str(config)]) == 2
    assert "unknown setting bogus" in capsys.readouterr().err


def test_cli_adapt_runs_the_stages(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    config = tmp_path / "adapt.yaml"
    with FakeOpenAIServer(_questions) as server:
        config.write_text(
            f"llm: openai:fake@{server.url}\nnum-negatives: 2\nfilter_top_k: 20\ndev_fraction: 0.2\nrelative_margin: null\nteacher-max-ratio: null\n",
            encoding="utf-8",
        )
        argv = ["adapt", str(tiny_bert_dir), "--config", str(config), "--corpus", str(corpus), "--teacher", str(teacher_dir), "--output-dir", str(out),
                "--batch-size", "8", "--max-length", "16", "--device", "cpu", "--quiet", "--generate-option", "backoff_base=0.01",
                "--train-option", "max_steps=2"]  # fmt: skip
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| trained |" in printed and str(out / "train" / "model") in printed
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["training"]["steps"] == 2 and report["settings"]["train_option"] == {"max_steps": 2}


def test_a_teacher_scoring_nan_fails_the_mine_stage_in_one_line_writing_no_rows(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import numpy as np

    from anglekit.mining.teacher import Teacher

    real = Teacher.score

    def nan_for_one_document(self: Teacher, anchors: list[str], texts: list[str]) -> np.ndarray:
        scores = real(self, anchors, texts)
        scores[[t == DOCUMENTS[5] for t in texts]] = np.nan
        return scores

    monkeypatch.setattr(Teacher, "score", nan_for_one_document)
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server, pytest.raises(DataError, match=r"pairs.jsonl, row \d+.*nan") as caught:
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out, dev_fraction=0.1))
    assert "\n" not in str(caught.value)
    stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
    assert stages["mine"]["status"] == "failed" and "nan" in stages["mine"]["error"] and "eval-start" not in stages
    assert not (out / "mined.jsonl").exists() and not (out / "report.json").exists()


def test_a_given_eval_set_is_scored_and_every_query_trains(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path, corpus: Path) -> None:
    beir = tmp_path / "eval-set"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(DOCUMENTS)), encoding="utf-8")
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"a {s} runs"}) + "\n" for i, s in enumerate(SUBJECTS[:5])), encoding="utf-8"
    )
    (beir / "qrels" / "test.tsv").write_text("".join(f"q{i}\td{i}\t1\n" for i in range(5)), encoding="utf-8")
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server:
        report = run_adapt(_config(server, tiny_bert_dir, teacher_dir, corpus, out, eval_data=str(beir), merge_weight=None)).report
    queries = _lines(out / "queries.jsonl")
    assert report["split"]["dev_queries"] == 0 and report["split"]["train_pairs"] == len(queries) == len(_lines(out / "pairs.jsonl"))
    assert not (out / "dev").exists() and report["eval_data"] == str(beir)
    scores = json.loads((out / "eval" / "trained" / "retrieval.json").read_text(encoding="utf-8"))
    assert list(scores["sets"]) == [beir.name] and report["scores"]["trained"] == pytest.approx(scores["scores"])


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ({"generate_option": {"llms": ["x"]}}, "--generate-option llms=...: adapt sets llms itself"),
        ({"generate_option": {"temprature": 0.5}}, "--generate-option temprature=...: not a setting of generate"),
        ({"mine_option": {"bogus": 1}}, "--mine-option bogus=...: not a setting of mine"),
        ({"train_option": {"output_dir": "x"}}, "--train-option output_dir=...: adapt sets output_dir itself"),
        ({"train_option": {"ibn_wieght": 4}}, "--train-option ibn_wieght=...: not a setting of train"),
        ({"merge_weight": [0.5, 0.5]}, "a weight is given twice"),
        ({"eval_data": None, "dev_fraction": 0.0}, "--dev-fraction 0 leaves no dev set"),
    ],
)
def test_bad_settings_are_refused_naming_them(tmp_path: Path, option: dict[str, Any], needle: str) -> None:
    values: dict[str, Any] = dict(model="m", corpus="c", llm="l", teacher="t", output_dir=str(tmp_path / "o"))
    with pytest.raises(ConfigError, match=re.escape(needle)):
        AdaptConfig(**{**values, **option})
    assert not (tmp_path / "o").exists()


def test_too_few_documents_for_a_dev_set_fail_the_split_naming_the_fix(tmp_path: Path, tiny_bert_dir: Path, teacher_dir: Path) -> None:
    path = tmp_path / "one.txt"
    path.write_text(DOCUMENTS[0] + "\n", encoding="utf-8")
    out = tmp_path / "run"
    with FakeOpenAIServer(_questions) as server, pytest.raises(DataError, match=r"name 1 document\(s\); holding 1 out .* give --eval-data"):
        run_adapt(_config(server, tiny_bert_dir, teacher_dir, path, out))
    stages = json.loads((out / "stages.json").read_text(encoding="utf-8"))["stages"]
    assert stages["queries"]["status"] == "done" and stages["split"]["status"] == "failed"
    assert not (out / "pairs.jsonl").exists() and not (out / "dev").exists()
