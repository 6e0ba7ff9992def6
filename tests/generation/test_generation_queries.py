"""anglekit generate --kind queries against the fake OpenAI-compatible server: documents of every
format in, (anchor, positive) rows with provenance out, read as they are by mine and train; every
filter's drops counted; the consistency filter against brute-force ranks; bad input refused."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_generation_fakeserver import FakeOpenAIServer, Reply, numbered

from anglekit.cli import main
from anglekit.errors import ConfigError, DataError, NothingGeneratedError
from anglekit.generation import DEFAULT_QUERY_TEMPLATES, GenerationConfig, QueryConfig, generate_queries, read_documents
from anglekit.generation.consistency import own_ranks
from anglekit.generation.documents import Documents
from anglekit.generation.pipeline import summary_path
from anglekit.generation.query_filters import QueryLimits, clean_queries, strip_query
from anglekit.generation.query_prompts import QueryTemplate, resolve_query_prompts

DOCS = {
    "d1": "A man in a blue shirt plays a guitar on a street corner.",
    "d2": "The Eiffel Tower was finished in 1889 for the World's Fair in Paris.",
    "d3": "To reset your password open Settings, choose Account and click Forgot password.",
    "d4": "Heavy rain flooded the streets of the old town on Monday night.",
}
_DOCUMENT = re.compile(r"Document: (.*)\n\n(?:Questions|Queries):$", re.DOTALL)


def document_of(body: dict[str, Any]) -> str:
    match = _DOCUMENT.search(body["messages"][-1]["content"])
    assert match, body
    return match.group(1)


def questions_for(document: str, n: int = 3) -> list[str]:
    head = " ".join(document.split()[:4]).lower()
    return [f"what is said about {head}", f"which details describe {head} here", f"why does the text mention {head}"][:n]


def default_script(body: dict[str, Any], n: int) -> Reply:
    return Reply(content=numbered(questions_for(document_of(body))))


def _config(server: FakeOpenAIServer, tmp_path: Path, **kwargs: Any) -> GenerationConfig:
    settings: dict[str, Any] = {
        "llms": [f"openai:fake-model@{server.url}"],
        "backoff_base": 0.01,
        "timeout": 5.0,
        "progress": False,
        "cache_dir": str(tmp_path / "cache"),
        "concurrency": 2,
    }
    settings.update(kwargs)
    return GenerationConfig(**settings)


def _documents(docs: dict[str, str] = DOCS) -> Documents:
    return Documents("docs.jsonl", list(docs), list(docs.values()), "id", None)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_queries_with_provenance_in_document_order_and_a_rerun_asks_nothing(tmp_path: Path) -> None:
    out = tmp_path / "queries.jsonl"
    with FakeOpenAIServer(default_script) as server:
        result = generate_queries(_documents(), out, _config(server, tmp_path))
        assert len(server.log) == 4 and result.complete
        rows = _lines(out)
        expected = [(q, text, ident) for ident, text in DOCS.items() for q in questions_for(text)]
        assert [(r["anchor"], r["positive"], r["doc_id"]) for r in rows] == expected
        template_sha = hashlib.sha256(DEFAULT_QUERY_TEMPLATES["question"].encode()).hexdigest()
        assert {(r["style"], r["prompt_id"], r["template_sha256"], r["llm"]) for r in rows} == {
            ("question", "anglekit-question-v1", template_sha, f"openai:fake-model@{server.url}")
        }
        assert all(len(r["answer_sha256"]) == 64 and "filter_rank" not in r for r in rows)
        summary = json.loads(summary_path(out).read_text())
        assert summary["queries"]["total"] == 12 and summary["documents"]["unique"] == 4 and summary["written"]
        assert summary["filters"] == dict.fromkeys(("parse", "empty", "document copy", "length", "duplicate", "size", "consistency"), 0)
        assert summary["queries_per_s"] > 0 and summary["requests"]["sent"] == 4
        again = generate_queries(_documents(), out, _config(server, tmp_path))
        assert len(server.log) == 4 and again.summary["requests"]["cache_hits"] == 4 and _lines(out) == rows


def test_size_is_per_document_and_style_and_both_styles_use_their_templates(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply:
        prompt = body["messages"][-1]["content"]
        document = document_of(body)
        if "search queries" in prompt:
            return Reply(content="\n".join(f"- {w} keywords {i}" for i, w in enumerate(document.split()[:4])))
        return Reply(content=numbered(questions_for(document)))

    with FakeOpenAIServer(script) as server:
        result = generate_queries(_documents(), tmp_path / "q.jsonl", _config(server, tmp_path, size=2), QueryConfig(styles=("question", "keyword")))
    rows = result.records
    assert len(server.log) == 8
    per = {(r["doc_id"], r["style"]) for r in rows}
    assert per == {(d, s) for d in DOCS for s in ("question", "keyword")}
    assert all(sum(1 for r in rows if (r["doc_id"], r["style"]) == key) == 2 for key in per)
    assert result.summary["drops"] == {"beyond size": 12} and result.summary["filters"]["size"] == 12  # 4 x (3 - 2 + 4 - 2)


def test_every_filter_counts_its_drops(tmp_path: Path) -> None:
    shared = "what is the weather like today"
    answers = {
        DOCS["d1"]: "",  # an answer without a query
        DOCS["d2"]: "1. 42\n2. --\n3. Here are three questions:\n4. " + DOCS["d2"] + "\n5. Question 5: Who built the tower in Paris?",
        DOCS["d3"]: "1. password?\n2. " + "word " * 50 + f"\n3. How do I reset my password?\n4. how do i reset my password\n5. {shared}",
        DOCS["d4"]: f'["{shared}", "Which streets flooded on Monday night?", "which streets flooded on monday night!!"]',
    }
    with FakeOpenAIServer(lambda body, n: Reply(content=answers[document_of(body)])) as server:
        result = generate_queries(_documents(), tmp_path / "q.jsonl", _config(server, tmp_path, size=5))
    assert [(r["doc_id"], r["anchor"]) for r in result.records] == [
        ("d2", "Who built the tower in Paris?"),
        ("d3", "How do I reset my password?"),
        ("d4", "Which streets flooded on Monday night?"),
    ]
    s = result.summary
    assert s["drops"] == {
        "answer without a query": 1,
        "no words": 1,
        "empty": 1,
        "not a query": 1,
        "copy of document": 1,
        "too short": 1,
        "too long": 1,
        "duplicate": 2,
        "duplicate across documents": 2,
    }
    assert s["filters"] == {"parse": 2, "empty": 2, "document copy": 1, "length": 2, "duplicate": 4, "size": 0, "consistency": 0}
    assert s["answer_formats"] == {"empty": 1, "numbered": 2, "json": 1}


def test_clean_queries_units() -> None:
    limits = QueryLimits(min_words=2, max_words=20, min_chars=3, max_chars=200, near_duplicate_ratio=0.9)
    document = "The quick brown fox jumps over the lazy dog near the river bank."
    kept, drops = clean_queries(
        ["Query 1: where does the fox jump?", "where does the fox jump", "the quick brown fox jumps over the lazy dog near the river bank",
         f"Is it true that {document}", "fox", "Where does the fox jumps?", "word " * 21, "The quick brown fox jumped over the lazy dog near a river bank"],
        document,
        limits,
    )  # fmt: skip
    assert kept == ["where does the fox jump?"]
    assert drops == {"duplicate": 1, "too long": 1, "copy of document": 3, "too short": 1, "near-duplicate": 1}
    assert [strip_query(t) for t in ("Q2. Who owns the dog?", "Document: fox near river", '"Keywords - fox river"')] == [
        "Who owns the dog?", "fox near river", "fox river"
    ]  # fmt: skip
    seen = ["where does the fox jump"]  # what another style or LLM kept for this document
    assert clean_queries(["Where does the fox jump?!", "Who owns the dog?"], document, limits, seen) == (["Who owns the dog?"], {"duplicate": 1})


def test_rows_are_read_as_they_are_by_mine_and_train(tmp_path: Path, tiny_bert_dir: Path) -> None:
    from anglekit.data.training_data import resolve_triplets, tuple_columns
    from anglekit.mining.mine import mine_hard_negatives
    from anglekit.mining.settings import MineSettings

    out = tmp_path / "queries.jsonl"
    with FakeOpenAIServer(default_script) as server:
        generate_queries(_documents(), out, _config(server, tmp_path))
    rows = _lines(out)
    data = resolve_triplets(str(out))
    assert list(data.anchor) == [r["anchor"] for r in rows] and list(data.positive) == [r["positive"] for r in rows] and data.negative is None
    assert tuple_columns(str(out))  # train reads it as (anchor, positive) rows
    report = mine_hard_negatives(str(tiny_bert_dir), out, tmp_path / "mined.jsonl", settings=MineSettings(num_negatives=1), model_kwargs={"device": "cpu"})
    mined = _lines(tmp_path / "mined.jsonl")
    assert report.rows == len(mined) > 0
    by_anchor = {r["anchor"]: r["positive"] for r in rows}
    assert all(m["positive"] == by_anchor[m["anchor"]] and m["negative_1"] != m["positive"] for m in mined)


def test_cli_generate_queries_then_train(tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in DOCS.items()))
    out = tmp_path / "pairs.jsonl"
    with FakeOpenAIServer(default_script) as server:
        rc = main(["generate", "--kind", "queries", "--input", str(corpus), "--output", str(out), "--llm", f"openai:fake@{server.url}", "--quiet",
                   "--backoff-base", "0.01", "--size", "2"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "queries: 8 for 4 of 4 documents" in err and "dropped by filter: parse 0" in err
    config = TrainConfig.from_dict(
        dict(model=str(tiny_bert_dir), train_data=str(out), output_dir=str(tmp_path / "run"), max_steps=2, batch_size=4, device="cpu",
             precision="fp32", quiet=True, logging_steps=1)
    )  # fmt: skip
    assert train(config) is not None and (tmp_path / "run" / "model").is_dir()


def test_documents_of_equal_text_are_asked_once_under_the_first_id(tmp_path: Path) -> None:
    docs = Documents("docs.jsonl", ["a", "b", "c"], [DOCS["d1"], DOCS["d2"], DOCS["d1"]], "id", None)
    with FakeOpenAIServer(default_script) as server:
        result = generate_queries(docs, tmp_path / "q.jsonl", _config(server, tmp_path))
    assert len(server.log) == 2 and [r["doc_id"] for r in result.records] == ["a"] * 3 + ["b"] * 3
    assert result.summary["documents"] | {"source": None} == {
        "source": None, "given": 3, "unique": 2, "duplicate_texts": 1, "done": 2, "id_column": "id", "title_column": None
    }  # fmt: skip


def test_a_filter_model_that_does_not_load_fails_before_any_request(tmp_path: Path) -> None:
    with FakeOpenAIServer(default_script) as server:
        with pytest.raises(ConfigError):
            generate_queries(_documents(), tmp_path / "q.jsonl", _config(server, tmp_path), QueryConfig(filter_model=str(tmp_path / "no-such-model")))
        assert server.log == []
    assert not (tmp_path / "q.jsonl").exists()


# ---------------------------------------------------------------- input formats and bad input


def _write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif path.suffix in (".csv", ".tsv"):
        import csv

        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t" if path.suffix == ".tsv" else ",")
            writer.writeheader()
            writer.writerows(rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv", ".parquet"])
def test_tables_with_id_title_and_text(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"corpus{suffix}"
    _write_table(path, [{"id": "a", "title": "Guitars", "text": "A man plays."}, {"id": "b", "title": "", "text": "Rain fell."}])
    docs = read_documents(path)
    assert (docs.ids, docs.texts, docs.id_column, docs.title_column) == (["a", "b"], ["Guitars A man plays.", "Rain fell."], "id", "title")


def test_beir_corpus_and_plain_text(tmp_path: Path) -> None:
    from anglekit.data.beir import read_beir

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    records = [{"_id": "x1", "title": "Paris", "text": "The tower is tall."}, {"_id": "x2", "text": "No title here."}]
    _write_table(folder / "corpus.jsonl", records)
    _write_table(folder / "queries.jsonl", [{"_id": "q", "text": "tower"}])
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\tx1\t1\n")
    docs = read_documents(folder / "corpus.jsonl")
    beir = read_beir(folder)
    assert (docs.ids, docs.texts) == (beir.corpus_ids, beir.corpus)  # the documents retrieval evaluation sees
    txt = tmp_path / "docs.txt"
    txt.write_text("First document.\nSecond document.\n")
    assert (read_documents(txt).ids, read_documents(txt).texts) == (["1", "2"], ["First document.", "Second document."])
    assert read_documents(txt, limit=1).texts == ["First document."]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.txt", "", "file is empty"),
        ("blank.txt", "One document.\n   \nAnother.\n", "row 2"),
        ("dups.jsonl", '{"id": "a", "text": "x y"}\n{"id": "b", "text": "z"}\n{"id": "a", "text": "w"}\n', "id 'a' is given twice (records 1 and 3)"),
        ("nulltext.jsonl", '{"id": "a", "text": null}\n', "row 1, field 'text'"),
        ("badtitle.jsonl", '{"id": "a", "title": 3, "text": "x"}\n', "title must be a string"),
    ],
)
def test_bad_corpora_are_refused_naming_file_and_row(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DataError, match=re.escape(message)) as caught:
        read_documents(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [("empty.txt", "", "file is empty"), ("dups.csv", "id,text\n1,a b\n1,c d\n", "is given twice")],
)
def test_cli_bad_corpus_exits_2_in_one_line_writing_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, needle: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / "q.jsonl"
    rc = main(["generate", "--kind", "queries", "--input", str(path), "--output", str(out), "--llm", "openai:m@http://127.0.0.1:9/v1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and str(path) in err and len(err.splitlines()) == 1
    assert not out.exists() and not summary_path(out).exists()


# ---------------------------------------------------------------- templates and flags


def test_templates_are_validated_and_read_from_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"must contain \{document\}"):
        QueryTemplate.user("question", "Write {size} questions about {text}")
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['title'\]"):
        QueryConfig(templates={"question": "{title}: {document}"})
    with pytest.raises(ConfigError, match="--keyword-template is not a valid format string"):
        QueryTemplate.user("keyword", "{document")
    with pytest.raises(ConfigError, match="does not ask for"):
        QueryConfig(styles=("question",), templates={"keyword": "{document}"})
    template = "Ask {size} things of: {document}"
    prompts = resolve_query_prompts(("question",), {"question": template})
    assert prompts["question"].prompt_id == "user-question-" + hashlib.sha256(template.encode()).hexdigest()[:10]
    assert prompts["question"].render("Doc.", 2) == "Ask 2 things of: Doc."


def test_settings_of_the_pairs_are_refused_not_ignored(tmp_path: Path) -> None:
    for setting, value in (("kinds", ("synonym",)), ("positive_label", 5.0), ("templates", {"synonym": "{text}"})):
        config = GenerationConfig(llms=["openai:m@http://127.0.0.1:9/v1"], cache_dir=str(tmp_path / "cache"), **{setting: value})
        with pytest.raises(ConfigError, match="to synonym/antonym pairs, not to --kind queries"):
            generate_queries(_documents(), tmp_path / "q.jsonl", config)
    assert not (tmp_path / "q.jsonl").exists() and not (tmp_path / "cache").exists()


def test_cli_template_from_a_file_reaches_the_server(tmp_path: Path) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("A man plays a guitar on the street.\n")
    template = tmp_path / "t.txt"
    template.write_text("Give {size} questions.\n\nDocument: {document}\n\nQuestions:")
    with FakeOpenAIServer(default_script) as server:
        rc = main(["generate", "--kind", "queries", "--input", str(corpus), "--output", str(tmp_path / "q.jsonl"), "--llm", f"openai:fake@{server.url}",
                   "--quiet", "--question-template", f"@{template}"])  # fmt: skip
        asked = [r.text for r in server.log]  # the whole prompt (not one of the paper's)
    assert rc == 0 and asked == ["Give 3 questions.\n\nDocument: A man plays a guitar on the street.\n\nQuestions:"]
    rows = _lines(tmp_path / "q.jsonl")
    assert {r["prompt_id"] for r in rows} == {"user-question-" + hashlib.sha256(template.read_text().encode()).hexdigest()[:10]}


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--kind", "both", "--filter-model", "m"], "--filter-model applies to --kind queries only"),
        (["--kind", "synonym", "--query-style", "keyword"], "--query-style applies to --kind queries only"),
        (["--kind", "queries", "--filter-top-k", "3"], "--filter-top-k applies to the consistency filter, and no --filter-model is given"),
        (["--kind", "queries", "--synonym-template", "{text}"], "applies to synonym/antonym pairs, not to --kind queries"),
        (["--kind", "queries", "--question-template", "no placeholder"], "must contain {document}"),
        (["--kind", "queries", "--question-template", "@/no/such/file"], "cannot read the template file"),
        (["--kind", "queries", "--min-words", "5", "--max-words", "3"], "--min-words (5) must not exceed --max-words (3)"),
    ],
)
def test_cli_flags_of_the_other_kind_or_bad_templates_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str) -> None:
    corpus = tmp_path / "docs.txt"
    corpus.write_text("A document.\n")
    out = tmp_path / "q.jsonl"
    rc = main(["generate", "--input", str(corpus), "--output", str(out), "--llm", "openai:m@http://127.0.0.1:9/v1", "--quiet", *flags])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()


# ---------------------------------------------------------------- nothing kept


def test_filters_that_keep_nothing_raise_naming_them_and_write_no_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "q.jsonl"
    with FakeOpenAIServer(lambda body, n: Reply(content=numbered([document_of(body), "ok"]))) as server:
        with pytest.raises(NothingGeneratedError, match=r"the filters kept none of the 8 candidate queries of 4 answers: copy of document 4, too short 4"):
            generate_queries(_documents(), out, _config(server, tmp_path))
        assert not out.exists()
        summary = json.loads(summary_path(out).read_text())
        assert not summary["written"] and not summary["complete"] and summary["filters"]["document copy"] == 4
        corpus = tmp_path / "docs.txt"
        corpus.write_text("\n".join(DOCS.values()) + "\n")
        rc = main(["generate", "--kind", "queries", "--input", str(corpus), "--output", str(out), "--llm", f"openai:fake-model@{server.url}", "--quiet",
                   "--cache", str(tmp_path / "cache")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "kept none" in err and len(err.splitlines()) == 1 and not out.exists()


def test_every_answer_empty_is_said_so(tmp_path: Path) -> None:
    with FakeOpenAIServer(lambda body, n: Reply(content="")) as server, pytest.raises(NothingGeneratedError, match="every one of the 4 answers is empty"):
        generate_queries(_documents(), tmp_path / "q.jsonl", _config(server, tmp_path))


# ---------------------------------------------------------------- consistency filter


def _brute_ranks(queries: np.ndarray, documents: np.ndarray, own: list[int]) -> tuple[list[int], list[bool]]:
    """Ranks by cosines in float64, one pair at a time; and for each query whether another document
    scores within 1e-5 of its own (where float32 rounding may order them either way)."""
    ranks, close = [], []
    for q, d in zip(np.asarray(queries, dtype=np.float64), own, strict=True):
        scores = [float(np.dot(q, x) / (np.linalg.norm(q) * np.linalg.norm(x))) for x in np.asarray(documents, dtype=np.float64)]
        ranks.append(1 + sum(s > scores[d] for s in scores))
        close.append(any(abs(s - scores[d]) < 1e-5 for j, s in enumerate(scores) if j != d))
    return ranks, close


def _agree(ranks: list[int], expected: list[int], close: list[bool]) -> None:
    assert sum(close) <= len(close) // 20
    assert [r for r, c in zip(ranks, close, strict=True) if not c] == [e for e, c in zip(expected, close, strict=True) if not c]


def test_own_ranks_equal_brute_force_ranks() -> None:
    rng = np.random.default_rng(0)
    documents = rng.normal(size=(57, 8)).astype(np.float32)
    documents[5] = documents[4]  # equal documents (equal texts) tie
    own = rng.integers(0, 57, size=2100)
    queries = documents[own] + rng.normal(scale=1.5, size=(2100, 8)).astype(np.float32)  # more than one block
    ranks = own_ranks(queries, documents, own)
    _agree(ranks.tolist(), *_brute_ranks(queries, documents, own.tolist()))
    assert ranks.max() > 1 and (ranks == 1).sum() > 0
    assert own_ranks(documents[4:6] * 2, documents, np.array([5, 4])).tolist() == [1, 1]  # a tie never ranks above the own document
    with pytest.raises(ConfigError):
        own_ranks(queries, documents[:, :4], own)


def _minilm() -> str:
    from anglekit.model.offline import minilm_dir

    try:
        return str(minilm_dir())
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")


def test_consistency_filter_keeps_what_ranks_its_document_within_k(tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 (``pypi:all-minilm-l6-v2``) as the filter: a query about the next document
    ranks that one first; the filter's ranks equal brute-force ranks of the model's own vectors."""
    from anglekit.model import Embedder

    directory = _minilm()

    def script(body: dict[str, Any], n: int) -> Reply:
        document = document_of(body)
        texts = list(DOCS.values())
        following = texts[(texts.index(document) + 1) % len(texts)]
        return Reply(content=numbered([" ".join(document.split()[:5]) + "?", " ".join(following.split()[:6]) + " again?", " ".join(document.split()[-4:])]))

    out = tmp_path / "q.jsonl"
    with FakeOpenAIServer(script) as server:
        config = _config(server, tmp_path)
        queries = QueryConfig(filter_model="pypi:all-minilm-l6-v2", filter_top_k=1, filter_device="cpu")
        result = generate_queries(_documents(), out, config, queries)
        unfiltered = generate_queries(_documents(), tmp_path / "all.jsonl", config)
    everything = unfiltered.records
    embedder = Embedder.from_pretrained(directory, device="cpu")
    texts = list(DOCS.values())
    q = embedder.encode_query([r["anchor"] for r in everything], normalize=True)
    d = embedder.encode_document(texts, normalize=True)
    expected, close = _brute_ranks(q, d, [texts.index(r["positive"]) for r in everything])
    assert not any(close)
    kept = [(r["anchor"], rank) for r, rank in zip(everything, expected, strict=True) if rank <= 1]
    assert [(r["anchor"], r["filter_rank"]) for r in result.records] == kept
    assert 0 < len(kept) < len(everything) and not any(r["anchor"].endswith("again?") for r in result.records)
    assert _lines(out) == result.records
    c = result.summary["consistency"]
    assert (c["checked"], c["kept"], c["dropped"], c["top_k"], c["model"]) == (
        len(everything),
        len(kept),
        len(everything) - len(kept),
        1,
        "pypi:all-minilm-l6-v2",
    )
    assert result.summary["filters"]["consistency"] == len(everything) - len(kept)
    # a larger k keeps what ranks within it
    wide = generate_queries(_documents(), tmp_path / "wide.jsonl", config, QueryConfig(filter_model=directory, filter_top_k=4, filter_device="cpu"))
    assert len(wide.records) == len(everything)


def test_a_consistency_filter_that_keeps_nothing_names_itself(tmp_path: Path, tiny_bert_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.generation import consistency

    monkeypatch.setattr(consistency, "own_ranks", lambda q, d, own: np.full(len(own), 3))
    out = tmp_path / "q.jsonl"
    with FakeOpenAIServer(default_script) as server:
        queries = QueryConfig(filter_model=str(tiny_bert_dir), filter_top_k=2, filter_device="cpu")
        with pytest.raises(
            NothingGeneratedError, match=r"the consistency filter \(--filter-model .*, --filter-top-k 2\) kept none of the 12 queries \(best rank"
        ):
            generate_queries(_documents(), out, _config(server, tmp_path), queries)
    assert not out.exists() and json.loads(summary_path(out).read_text())["filters"]["consistency"] == 12


# ---------------------------------------------------------------- Ctrl-C


@pytest.mark.parametrize("filtered", [False, True], ids=["unfiltered", "with-filter-model"])
def test_ctrl_c_keeps_the_answers_and_a_rerun_asks_only_the_rest(tmp_path: Path, tiny_bert_dir: Path, filtered: bool) -> None:
    """SIGINT while a request is held: exit 130; without a filter the rows of the documents done are
    written (complete: false), with one no rows at all (they would be unfiltered); a rerun asks only
    the rest."""
    import signal
    import subprocess
    import sys
    import time

    documents = [f"Document number {i} talks about the topic {chr(97 + i)} at length." for i in range(6)]
    source = tmp_path / "docs.txt"
    source.write_text("\n".join(documents) + "\n")
    out = tmp_path / "q.jsonl"
    state = {"hang": True}

    def script(body: dict[str, Any], n: int) -> Reply:
        if state["hang"] and documents[3] in body["messages"][-1]["content"]:
            return Reply(hang=True)
        return default_script(body, n)

    command = [sys.executable, "-m", "anglekit.cli", "generate", "--kind", "queries", "--input", str(source), "--output", str(out), "--quiet",
               "--concurrency", "1"]  # fmt: skip
    if filtered:
        command += ["--filter-model", str(tiny_bert_dir), "--filter-top-k", "6", "--filter-device", "cpu"]
    with FakeOpenAIServer(script) as server:
        command += ["--llm", f"openai:fake@{server.url}"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not any(r.status == 0 for r in server.log):
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=20) == 130
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        summary = json.loads(summary_path(out).read_text())
        assert summary["interrupted"] and not summary["complete"] and summary["requests"]["answered"] == 3
        assert summary["written"] is (not filtered) and out.exists() is (not filtered)
        if not filtered:
            assert [r["positive"] for r in _lines(out)] == [d for d in documents[:3] for _ in range(3)]
        state["hang"] = False
        rerun = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=180)
        assert rerun.returncode == 0, rerun.stderr.decode()
        asked = [r.text for r in server.ok()]
    assert len(asked) == len(set(asked)) == 6 and len(_lines(out)) == 18
    assert json.loads(summary_path(out).read_text())["complete"]
