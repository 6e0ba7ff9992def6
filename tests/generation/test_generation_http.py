"""anglekit generate against a fake OpenAI-compatible server on 127.0.0.1: answers in every format,
bad answers, 429/5xx/timeouts with retries, failures, the cache, ensembles, the CLI and training."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_generation_fakeserver import FakeOpenAIServer, Reply, default_sentences, numbered

from anglekit.cli.generate import add_parser as add_generate_parser
from anglekit.cli.generate import run as run_generate
from anglekit.data.readers import read_pairs
from anglekit.generation import GenerationConfig, generate_pairs
from anglekit.generation.backends import BackendError
from anglekit.generation.pipeline import summary_path

SENTENCES = ["A man is playing a guitar.", "The children ran across the park.", "She bought fresh bread this morning.", "Heavy rain flooded the streets."]


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


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_normal_answers_make_labelled_pairs_with_provenance_and_resume_from_cache(tmp_path: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    with FakeOpenAIServer() as server:
        result = generate_pairs(SENTENCES, out, _config(server, tmp_path))
        assert len(server.log) == 8  # 4 inputs x 2 kinds
        records = _lines(out)
        assert len(records) == 24 and result.complete
        first = records[0]
        assert set(first) == {"text1", "text2", "label", "llm", "prompt_id", "kind", "answer_sha256"}
        assert first["llm"] == f"openai:fake-model@{server.url}" and len(first["answer_sha256"]) == 64
        assert {(r["kind"], r["label"], r["prompt_id"]) for r in records} == {("synonym", 1.0, "paper-synonym"), ("antonym", 0.0, "paper-antonym")}
        expected = {(t, s) for t in SENTENCES for k in ("synonym", "antonym") for s in default_sentences(t, k)}
        assert {(r["text1"], r["text2"]) for r in records} == expected
        summary = json.loads(summary_path(out).read_text())
        assert summary["requests"]["sent"] == 8 and summary["requests"]["cache_hits"] == 0 and summary["pairs"]["total"] == 24
        assert summary["answer_formats"] == {"numbered": 8} and summary["sentences_per_s"] > 0
        # the paper's prompt, verbatim
        assert server.headers_seen and "Authorization" not in server.headers_seen[0]
        # a rerun asks nothing and writes the same file
        again = generate_pairs(SENTENCES, out, _config(server, tmp_path))
        assert len(server.log) == 8 and again.summary["requests"]["cache_hits"] == 8
        assert _lines(out) == records
    pairs = read_pairs(out)
    assert len(pairs) == 24


ANSWERS = {
    "numbered": ("1. First answer here.\n2) Second answer here.\n(3) Third answer here.", "numbered"),
    "bulleted": ("Sure! Here they are:\n- First answer here.\n* Second answer here.\n• Third answer here.", "bulleted"),
    "quoted": ('"First answer here." "Second answer here." "Third answer here."', "quoted"),
    "json": ('["First answer here.", "Second answer here.", "Third answer here."]', "json"),
    "json-objects": (
        '```json\n{"sentences": [{"sentence": "First answer here."}, {"text": "Second answer here."}, {"sentence": "Third answer here."}]}\n```',
        "json",
    ),
    "json-malformed": ('["First answer here.", "Second answer here.", "Third answer here.",', "json-malformed"),
    "lines": ("First answer here.\nSecond answer here.\nThird answer here.", "lines"),
    "json-nested-object": ('{"result": {"synonyms": ["First answer here.", "Second answer here.", "Third answer here."]}}', "json"),
    "json-nested-list": ('[{"sentences": ["First answer here.", "Second answer here."]}, {"sentences": ["Third answer here."]}]', "json"),
    "json-list-of-lists": ('{"data": [["First answer here."], ["Second answer here."], [{"id": "s3", "value": "Third answer here."}]], "n": 3}', "json"),
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_each_answer_format_is_parsed(name: str, tmp_path: Path) -> None:
    content, fmt = ANSWERS[name]
    with FakeOpenAIServer(lambda body, n: Reply(content=content)) as server:
        result = generate_pairs(["An input sentence."], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",)))
    assert [r["text2"] for r in result.records] == ["First answer here.", "Second answer here.", "Third answer here."]
    assert result.summary["answer_formats"] == {fmt: 1}


@pytest.mark.parametrize("content", ["42", "3.5", "[1, 2, 3]", "null", "1. 42\n2. 17\n3. --"])
def test_an_answer_of_numbers_yields_no_pair_and_is_counted(content: str, tmp_path: Path) -> None:
    """A bare number (or only numbers) is not a sentence: no pair, counted as non-text or as 'no words'."""
    with FakeOpenAIServer(lambda body, n: Reply(content=content)) as server:
        result = generate_pairs(["An input sentence."], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",)))
    assert result.records == [] and _lines(tmp_path / "p.jsonl") == [] and result.complete
    formats, drops = result.summary["answer_formats"], result.summary["drops"]
    assert formats == {"non-text": 1} or (formats == {"numbered": 1} and drops == {"no words": 3}), (formats, drops)


def test_empty_and_bad_answers_are_counted_not_fatal(tmp_path: Path) -> None:
    answers = {
        "Empty one.": "",
        "Copies.": "1. Copies.\n2. copies\n3. A real new sentence.\n4. A real new sentence!\n5. ",
        "Too long.": "1. " + "word " * 200 + "\n2. ok",
    }

    def script(body: dict[str, Any], n: int) -> Reply:
        text = body["messages"][0]["content"].split("Input sentence: ")[1].rsplit(". Output:", 1)[0]
        return Reply(content=answers[text])

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(list(answers), tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",), max_chars=200))
    assert [r["text2"] for r in result.records] == ["A real new sentence."]
    drops = result.summary["drops"]
    assert drops == {"copy of input": 2, "duplicate": 1, "empty": 1, "too long": 1, "too short": 1}
    assert result.summary["answer_formats"]["empty"] == 1 and result.complete


def test_429_with_retry_after_is_honoured(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        return Reply(status=429, headers={"Retry-After": "1"}) if n == 0 else None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",), backoff_base=0.0))
        times = [r.at for r in server.log]
    assert [r.status for r in server.log] == [429, 200]
    assert times[1] - times[0] >= 0.95  # waited as told, not the (zero) backoff
    assert result.summary["requests"]["retries_by_reason"] == {"HTTP 429": 1} and len(result.records) == 3


def test_500s_are_retried_then_a_persistent_failure_is_reported_and_resumed(tmp_path: Path) -> None:
    broken = {"Heavy rain flooded the streets."}

    def script(body: dict[str, Any], n: int) -> Reply | None:
        if n < 2:
            return Reply(status=500)
        if any(b in body["messages"][0]["content"] for b in broken):
            return Reply(status=502)
        return None

    out = tmp_path / "p.jsonl"
    with FakeOpenAIServer(script) as server:
        config = _config(server, tmp_path, kinds=("synonym",), max_retries=2, concurrency=1)
        result = generate_pairs(SENTENCES, out, config)
        summary = result.summary
        assert summary["requests"]["failed"] == 1 and not summary["complete"]
        assert summary["requests"]["retries"] == 2 + 2 and "giving up after 3 attempts" in summary["errors"][0]
        assert {r["text1"] for r in result.records} == set(SENTENCES) - broken
        broken.clear()  # the server recovers: a rerun asks only for the failed input
        before = len(server.log)
        again = generate_pairs(SENTENCES, out, config)
        assert [r.text for r in server.log[before:]] == ["Heavy rain flooded the streets."]
    assert again.complete and len(_lines(out)) == 12


def test_timeouts_and_malformed_bodies_are_retried(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        if n == 0:
            return Reply(delay=1.5)
        if n == 1:
            return Reply(raw_body="{not json")
        return None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",), timeout=0.5, concurrency=1))
    assert result.summary["requests"]["retries_by_reason"] == {"timeout": 1, "malformed response": 1}
    assert len(result.records) == 3 and result.complete


def test_unauthorised_stops_the_run(tmp_path: Path) -> None:
    with FakeOpenAIServer(lambda body, n: Reply(status=401)) as server:
        with pytest.raises(BackendError, match="401"):
            generate_pairs(SENTENCES * 1, tmp_path / "p.jsonl", _config(server, tmp_path, concurrency=1))
        assert len(server.log) <= 3  # no retries, and the rest are not sent


def test_api_key_from_environment_usage_and_cost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANGLEKIT_TEST_KEY", "sk-test")
    with FakeOpenAIServer(lambda body, n: Reply(usage={"prompt_tokens": 100, "completion_tokens": 50})) as server:
        config = _config(server, tmp_path, api_key_env="ANGLEKIT_TEST_KEY", price_prompt=1.0, price_completion=2.0)
        result = generate_pairs(SENTENCES[:2], tmp_path / "p.jsonl", config)
    assert all(h.get("Authorization") == "Bearer sk-test" for h in server.headers_seen)
    assert result.summary["usage"] == {"prompt_tokens": 400, "completion_tokens": 200}
    assert result.summary["cost"] == pytest.approx(400 / 1e6 + 400 / 1e6)
    assert "sk-test" not in summary_path(tmp_path / "p.jsonl").read_text()


def test_concurrency_limit(tmp_path: Path) -> None:
    with FakeOpenAIServer(lambda body, n: Reply(delay=0.15)) as server:
        generate_pairs(SENTENCES, tmp_path / "p.jsonl", _config(server, tmp_path, concurrency=3))
    assert 2 <= server.max_inflight <= 3


def test_ensemble_keeps_provenance_and_merges_duplicates(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        if body["model"] == "second":
            text = body["messages"][0]["content"].split("Input sentence: ")[1].rsplit(". Output:", 1)[0]
            kind = "antonym" if "opposite" in body["messages"][0]["content"] else "synonym"
            ours = default_sentences(text, kind)[:1] + [f"A second model's {kind} of {text}", f"Another way to see the {kind}: {text} or so"]
            return Reply(content=numbered(ours))
        return None

    with FakeOpenAIServer(script) as server:
        llms = [f"openai:first@{server.url}", f"openai:second@{server.url}"]
        result = generate_pairs(SENTENCES[:2], tmp_path / "p.jsonl", _config(server, tmp_path, llms=llms, positive_label=5.0, negative_label=0.0))
    per_llm = result.summary["pairs"]["per_llm"]
    assert per_llm[llms[0]] == {"synonym": 6, "antonym": 6} and per_llm[llms[1]] == {"synonym": 4, "antonym": 4}
    assert result.summary["drops"] == {"duplicate across llms": 4}
    assert {r["label"] for r in result.records if r["kind"] == "synonym"} == {5.0}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anglekit")
    add_generate_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_cli_generate_then_train_two_steps(tmp_path: Path, tiny_bert_dir: Path) -> None:
    from anglekit.training.config import TrainConfig
    from anglekit.training.run import train

    source = tmp_path / "sentences.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "pairs.jsonl"
    with FakeOpenAIServer() as server:
        args = _parser().parse_args(
            ["generate", "--input", str(source), "--output", str(out), "--llm", f"openai:fake@{server.url}", "--quiet", "--backoff-base", "0.01"]
        )
        assert run_generate(args) == 0
    assert (tmp_path / "pairs.jsonl.cache").is_dir() and summary_path(out).is_file()
    config = TrainConfig.from_dict(
        dict(
            model=str(tiny_bert_dir),
            train_data=str(out),
            output_dir=str(tmp_path / "run"),
            max_steps=2,
            batch_size=8,
            positive_threshold=1.0,
            device="cpu",
            precision="fp32",
            quiet=True,
            logging_steps=1,
        )
    )
    result = train(config)
    assert (tmp_path / "run" / "model").is_dir() and result is not None


def test_kill_mid_run_then_resume_asks_nothing_twice_and_loses_nothing(tmp_path: Path) -> None:
    sentences = [f"Sentence number {i} talks about topic {chr(97 + i)}." for i in range(12)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n")
    out = tmp_path / "pairs.jsonl"
    hang_at = sentences[7]
    state = {"hang": True}

    def script(body: dict[str, Any], n: int) -> Reply | None:
        if state["hang"] and hang_at in body["messages"][0]["content"]:
            return Reply(hang=True)
        return Reply(delay=0.02)

    command = [
        sys.executable,
        "-m",
        "anglekit.cli",
        "generate",
        "--input",
        str(source),
        "--output",
        str(out),
        "--quiet",
        "--concurrency",
        "2",
        "--backoff-base",
        "0.01",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with FakeOpenAIServer(script) as server:
        command += ["--llm", f"openai:fake@{server.url}"]
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            cache = tmp_path / "pairs.jsonl.cache"
            # wait until the hung request has arrived and every answered request is cached
            while time.monotonic() < deadline:
                answered = len(server.ok())
                if any(r.text == hang_at for r in server.log) and answered >= 4 and len(list(cache.glob("*/*.json"))) == answered:
                    break
                assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
                time.sleep(0.05)
            else:
                pytest.fail("the generator did not reach the hung request")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        first_run = [(r.text, r.kind) for r in server.ok()]
        assert 4 <= len(first_run) < 24 and not out.exists()
        state["hang"] = False
        server.release.set()
        second = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        assert second.returncode == 0, second.stderr.decode()
        asked = [(r.text, r.kind) for r in server.ok()]
    assert len(asked) == len(set(asked)) == 24  # every (input, kind) answered exactly once over both runs
    records = _lines(out)
    keys = [(r["text1"], r["text2"]) for r in records]
    expected = {(t, s) for t in sentences for k in ("synonym", "antonym") for s in default_sentences(t, k)}
    assert len(keys) == len(set(keys)) and set(keys) == expected
    summary = json.loads(summary_path(out).read_text())
    assert summary["requests"]["cache_hits"] == len(first_run) and summary["complete"]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a shell without job control does to `cmd &`


@pytest.mark.parametrize("sigint_ignored_at_start", [False, True], ids=["sigint-default", "sigint-ignored-by-parent"])
def test_ctrl_c_writes_what_is_done_and_exits_130(tmp_path: Path, sigint_ignored_at_start: bool) -> None:
    """SIGINT while a request is held by the server (reached by construction): exit 130, not complete,
    the done pairs written, and a rerun asks only the rest. Also when the parent ignored SIGINT (a script's
    `anglekit generate ... &`), where the run used to go on to the end and exit 0 as complete."""
    sentences = [f"Sentence number {i} talks about topic {chr(97 + i)}." for i in range(6)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(sentences) + "\n")
    out = tmp_path / "pairs.jsonl"
    state = {"hang": True}

    def script(body: dict[str, Any], n: int) -> Reply | None:
        return Reply(hang=True) if state["hang"] and sentences[3] in body["messages"][0]["content"] else None

    command = [sys.executable, "-m", "anglekit.cli", "generate", "--input", str(source), "--output", str(out), "--quiet", "--concurrency", "1"]
    with FakeOpenAIServer(script) as server:
        command += ["--llm", f"openai:fake@{server.url}"]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_ignore_sigint if sigint_ignored_at_start else None)
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
        assert summary["interrupted"] and not summary["complete"] and summary["requests"]["answered"] == 6
        assert len(_lines(out)) == 18  # the pairs of the 3 inputs done
        state["hang"] = False
        assert subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120).returncode == 0
        asked = [(r.text, r.kind) for r in server.ok()]
    assert len(asked) == len(set(asked)) == 12 and len(_lines(out)) == 36


def test_an_antonym_negating_its_input_is_kept_and_drops_are_counted_per_kind(tmp_path: Path) -> None:
    source = "A man is spreading shredded cheese on a pizza."
    negation = "A man is not spreading shredded cheese on a pizza."

    def script(body: dict[str, Any], n: int) -> Reply:
        if "opposite-meaning" in body["messages"][0]["content"]:
            return Reply(content=numbered([negation, "A woman eats a salad.", "The man removes the cheese from the pizza."]))
        return Reply(
            content=numbered(
                [
                    "A man spreads grated cheese over a pizza.",
                    "A man is spreading shredded cheese on a pizza!",
                    "A man is spreading shredded cheese on the pizza.",
                ]
            )
        )

    with FakeOpenAIServer(script) as server:
        result = generate_pairs([source], tmp_path / "p.jsonl", _config(server, tmp_path))
    antonyms = [r["text2"] for r in result.records if r["kind"] == "antonym"]
    assert antonyms == [negation, "A woman eats a salad.", "The man removes the cheese from the pizza."]
    assert [r["text2"] for r in result.records if r["kind"] == "synonym"] == ["A man spreads grated cheese over a pizza."]
    assert result.summary["drops_by_kind"] == {"synonym": {"copy of input": 1, "near-duplicate of input": 1}, "antonym": {}}
    assert result.summary["drops"] == {"copy of input": 1, "near-duplicate of input": 1}


@pytest.mark.parametrize("status", [520, 529, 599])
def test_every_5xx_is_retried(tmp_path: Path, status: int) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        return Reply(status=status) if n == 0 else None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",)))
    assert [r.status for r in server.log] == [status, 200]
    assert result.complete and result.summary["requests"]["retries_by_reason"] == {f"HTTP {status}": 1}


MAX_TOKENS_ERROR = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."


def test_a_repeated_400_stops_the_run_keeping_what_is_done(tmp_path: Path) -> None:
    sentences = [f"Sentence number {i} talks about topic {chr(97 + i)}." for i in range(10)]
    state = {"broken": True}

    def script(body: dict[str, Any], n: int) -> Reply | None:
        if state["broken"] and n >= 2:
            return Reply(status=400, raw_body=json.dumps({"error": {"message": MAX_TOKENS_ERROR, "type": "invalid_request_error"}}))
        return None

    out = tmp_path / "p.jsonl"
    with FakeOpenAIServer(script) as server:
        config = _config(server, tmp_path, kinds=("synonym",), concurrency=1)
        with pytest.raises(BackendError) as info:
            generate_pairs(sentences, out, config)
        message = str(info.value)
        assert info.value.fatal and MAX_TOKENS_ERROR in message and "HTTP 400" in message and "3 times in a row" in message
        assert len(server.log) == 2 + 3  # stopped early: the last 5 inputs were never sent, nothing was retried
        summary = json.loads(summary_path(out).read_text())
        assert not summary["complete"] and summary["requests"]["answered"] == 2 and summary["requests"]["failed"] == 3
        assert summary["requests"]["not_run"] == 5
        assert {r["text1"] for r in _lines(out)} == set(sentences[:2])  # the answers so far are written
        state["broken"] = False  # fixed: a rerun asks only for what is missing
        before = len(server.log)
        again = generate_pairs(sentences, out, config)
        assert sorted(r.text for r in server.log[before:]) == sorted(sentences[2:])
    assert again.complete and again.summary["requests"]["cache_hits"] == 2 and len(_lines(out)) == 30


def test_different_400s_fail_one_by_one_without_stopping(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        if n % 2 == 0:
            return Reply(status=400, raw_body=json.dumps({"error": {"message": f"input {n} rejected by the content filter"}}))
        return None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES, tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",), concurrency=1))
    assert result.summary["requests"]["failed"] == 2 and result.summary["requests"]["answered"] == 2
    assert "content filter" in result.summary["errors"][0]


def test_cli_repeated_400_exits_with_the_servers_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anglekit.cli import main

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")

    def script(body: dict[str, Any], n: int) -> Reply:
        return Reply(status=400, raw_body=json.dumps({"error": {"message": MAX_TOKENS_ERROR}}))

    with FakeOpenAIServer(script) as server:
        rc = main(
            [
                "generate",
                "--input",
                str(source),
                "--output",
                str(tmp_path / "p.jsonl"),
                "--llm",
                f"openai:fake@{server.url}",
                "--quiet",
                "--concurrency",
                "1",
                "--max-repeated-errors",
                "2",
            ]
        )
        assert len(server.log) == 2
    assert rc == 2 and MAX_TOKENS_ERROR in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--device", "cpu"], "--device applies"),
        (["--dtype", "bf16", "--revision", "main"], "--dtype, --revision apply"),
        (["--trust-remote-code"], "--trust-remote-code applies"),
        (["--batch-size", "4"], "--batch-size applies"),
    ],
)
def test_cli_hf_options_without_an_hf_llm_are_refused_before_any_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    from anglekit.cli import main

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    with FakeOpenAIServer() as server:
        rc = main(["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--llm", f"openai:fake@{server.url}", "--quiet", *flags])
        assert server.log == []
    err = capsys.readouterr().err
    assert rc == 2 and named in err and "no --llm hf:NAME" in err and err.count("\n") == 1, err
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("where", ["same", "symlink", "cache", "summary"])
def test_cli_output_over_the_input_is_refused_and_the_input_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    from anglekit.cli import main

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    before = source.read_bytes()
    output, extra = source, []
    if where == "symlink":
        output = tmp_path / "link.jsonl"
        output.symlink_to(source)
    elif where == "cache":
        output, extra = tmp_path / "p.jsonl", ["--cache", str(source)]
    elif where == "summary":
        source = tmp_path / "p.jsonl.summary.json"
        source.write_bytes(before)
        output = tmp_path / "p.jsonl"
    with FakeOpenAIServer() as server:
        rc = main(["generate", "--input", str(source), "--output", str(output), "--llm", f"openai:fake@{server.url}", "--quiet", *extra])
        assert server.log == []
    err = capsys.readouterr().err
    assert rc == 2 and "would overwrite the input" in err and err.count("\n") == 1, err
    assert source.read_bytes() == before


@pytest.mark.parametrize("flags", [["--positive-label", "nan"], ["--temperature", "nan"], ["--backoff-max", "inf"]])
def test_cli_non_finite_numbers_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    import helpers

    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    with FakeOpenAIServer() as server:
        argv = ["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--llm", f"openai:fake@{server.url}", "--quiet", *flags]
        rc, _, err = helpers.run_cli(argv, capsys)
        assert server.log == []
    # A flag with a range refuses nan when parsed (its range in the message); the others when checked.
    assert rc == 2 and ("must be a finite number" in err or f"got {flags[1]}" in err) and not (tmp_path / "p.jsonl").exists(), err


def _closed_port() -> int:
    """A port nothing listens on (bound, then closed): connecting to it is refused."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_connection_is_retried_then_given_up_naming_the_url() -> None:
    from anglekit.generation.backends import GenerationParams
    from anglekit.generation.backends.openai_compat import OpenAICompatBackend, RetryPolicy

    retries: list[tuple[str, float]] = []
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    backend = OpenAICompatBackend("m", base, retry=RetryPolicy(max_retries=2, backoff_base=0.0), on_retry=lambda reason, wait: retries.append((reason, wait)))
    with pytest.raises(BackendError) as info:
        backend.complete("Say hi.", GenerationParams())
    backend.close()
    assert not info.value.fatal and str(info.value).startswith(f"{base}/chat/completions: giving up after 3 attempts (last: connection error")
    assert len(retries) == 2 and all(reason.startswith("connection error") and wait == 0.0 for reason, wait in retries)


def test_a_redirect_is_not_followed_but_reported(tmp_path: Path) -> None:
    with FakeOpenAIServer(lambda body, n: Reply(status=307, headers={"Location": "/v2/chat/completions"})) as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",)))
        assert len(server.log) == 1
    assert result.summary["requests"]["failed"] == 1 and "HTTP 307 Temporary Redirect: 'scripted'" in result.summary["errors"][0]


def test_a_loopback_server_is_reached_past_an_environment_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, dead)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with FakeOpenAIServer() as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, kinds=("synonym",), max_retries=0))
    assert result.complete and len(result.records) == 3


def test_without_httpx_the_backend_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from anglekit.errors import ConfigError
    from anglekit.generation.backends.openai_compat import OpenAICompatBackend

    monkeypatch.setitem(sys.modules, "httpx", None)  # import httpx -> ImportError
    with pytest.raises(ConfigError, match=r"needs httpx: pip install 'anglekit\[llm\]'"):
        OpenAICompatBackend("m", "http://127.0.0.1:1/v1")
