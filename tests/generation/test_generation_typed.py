"""anglekit generate with wrongly typed specs, answers and flags (issue 40): a base URL that is not
http(s) is refused before anything is sent, an answer that is not text fails its request, a run of
empty answers writes no pairs, and ``--cache`` naming a file names the flag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_generation_fakeserver import FakeOpenAIServer, Reply

from anglekit.errors import ConfigError, NothingGeneratedError
from anglekit.generation import GenerationConfig, generate_pairs, parse_llm_spec
from anglekit.generation.pipeline import summary_path

import helpers

SENTENCES = ["A man is playing a guitar.", "The children ran across the park."]


def _config(server: FakeOpenAIServer, tmp_path: Path, **kwargs: Any) -> GenerationConfig:
    settings: dict[str, Any] = {
        "llms": [f"openai:fake-model@{server.url}"],
        "backoff_base": 0.0,
        "timeout": 5.0,
        "progress": False,
        "cache_dir": str(tmp_path / "cache"),
        "concurrency": 1,
        "kinds": ("synonym",),
    }
    settings.update(kwargs)
    return GenerationConfig(**settings)


@pytest.fixture
def no_http_client(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Creating any HTTP client fails the test: nothing can be sent."""
    import httpx

    made: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        made.append((args, kwargs))
        raise AssertionError("an HTTP client was created")

    monkeypatch.setattr(httpx, "Client", refuse)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leave")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return made


@pytest.mark.parametrize(
    ("spec", "url"),
    [
        ("openai:m@127.0.0.1:8000/v1", "127.0.0.1:8000/v1"),
        ("openai:m@localhost:8000", "localhost:8000"),
        ("openai:m@ftp://127.0.0.1/v1", "ftp://127.0.0.1/v1"),
        ("openai:m@", ""),
        ("openai:m@http://", "http://"),
        ("openai:m@https:///v1", "https:///v1"),
    ],
)
def test_a_spec_whose_url_is_not_http_is_refused_naming_it(spec: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        parse_llm_spec(spec)
    message = str(info.value)
    assert f"--llm {spec!r}" in message and repr(url) in message and "nothing was sent" in message and "\n" not in message


def test_good_specs_still_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert parse_llm_spec("openai:qwen2.5:7b@HTTP://127.0.0.1:11434/v1/").base_url == "HTTP://127.0.0.1:11434/v1"
    named = parse_llm_spec("openai:name@v1@https://h.example/v1")
    assert (named.model, named.base_url) == ("name@v1", "https://h.example/v1")
    assert parse_llm_spec("openai:m").base_url == "https://api.openai.com/v1"


def test_openai_base_url_from_the_environment_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    assert parse_llm_spec("openai:m").base_url == "http://127.0.0.1:9/v1"
    assert parse_llm_spec("openai:m", "https://h.example/v1").base_url == "https://h.example/v1"  # --base-url wins
    monkeypatch.setenv("OPENAI_BASE_URL", "127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"^\$OPENAI_BASE_URL: base URL '127.0.0.1:9/v1' must start with http"):
        parse_llm_spec("openai:m")
    with pytest.raises(ConfigError, match=r"^--base-url: base URL 'ftp://h/v1' must start with http"):
        parse_llm_spec("openai:m", "ftp://h/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "")  # empty: unset, as shells write it
    assert parse_llm_spec("openai:m").base_url == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--llm", "openai:m@127.0.0.1:{port}/v1"], "'127.0.0.1:{port}/v1'"),
        (["--llm", "openai:m@ftp://127.0.0.1:{port}/v1"], "'ftp://127.0.0.1:{port}/v1'"),
        (["--llm", "openai:m", "--base-url", "127.0.0.1:{port}/v1"], "--base-url: base URL '127.0.0.1:{port}/v1'"),
    ],
)
def test_cli_refuses_a_bad_url_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_http_client: list[Any], flags: list[str], named: str
) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    with FakeOpenAIServer() as server:
        port = server.url.split(":")[2].split("/")[0]
        argv = ["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--quiet", *[f.format(port=port) for f in flags]]
        rc, _, err = helpers.run_cli(argv, capsys)
        assert server.log == []
    assert rc == 2 and named.format(port=port) in err and err.count("\n") == 1, err
    assert no_http_client == [] and not (tmp_path / "p.jsonl").exists() and not (tmp_path / "p.jsonl.cache").exists()


def test_cli_refuses_a_bad_openai_base_url_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_http_client: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1:9/v1")
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    rc, _, err = helpers.run_cli(["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--llm", "openai:m", "--quiet"], capsys)
    assert rc == 2 and "$OPENAI_BASE_URL: base URL 'ftp://127.0.0.1:9/v1'" in err and no_http_client == [], err


def test_openai_base_url_variable_reaches_its_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path, llms=["openai:fake-model"]))
        assert len(server.log) == 1
    assert result.complete and len(result.records) == 3 and result.records[0]["llm"] == f"openai:fake-model@{server.url}"


def _raw(content: Any) -> Reply:
    return Reply(raw_body=json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}))


@pytest.mark.parametrize("content", [42, 3.5, None, ["First answer here."], {"text": "x"}, True])
def test_an_answer_that_is_not_text_fails_its_request(tmp_path: Path, content: Any) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        return _raw(content) if SENTENCES[0] in body["messages"][0]["content"] else None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES, tmp_path / "p.jsonl", _config(server, tmp_path))
        assert len(server.log) == 2  # not retried
    requests = result.summary["requests"]
    assert requests["failed"] == 1 and requests["answered"] == 1 and not result.complete
    assert "choices[0].message.content is" in result.summary["errors"][0] and "not text" in result.summary["errors"][0]
    assert json.dumps(content) in result.summary["errors"][0]
    assert {r["text1"] for r in result.records} == {SENTENCES[1]} and "empty" not in result.summary["answer_formats"]


def test_a_completions_answer_that_is_not_text_fails_too(tmp_path: Path) -> None:
    body = json.dumps({"choices": [{"index": 0, "text": 7}]})
    with FakeOpenAIServer(lambda b, n: Reply(raw_body=body)) as server:
        result = generate_pairs(SENTENCES[:1], tmp_path / "p.jsonl", _config(server, tmp_path))
    assert result.summary["requests"]["failed"] == 1 and "choices[0].text is int 7, not text" in result.summary["errors"][0]


def test_every_answer_empty_raises_and_writes_no_pairs(tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    with FakeOpenAIServer(lambda b, n: Reply(content="  \n")) as server:
        with pytest.raises(NothingGeneratedError) as info:
            generate_pairs(SENTENCES, out, _config(server, tmp_path))
        assert len(server.log) == 2
    assert "every one of the 2 answers" in str(info.value) and f"openai:fake-model@{server.url}" in str(info.value)
    assert not out.exists()
    summary = json.loads(summary_path(out).read_text())
    assert summary["nothing_generated"] is True and summary["complete"] is False and summary["answer_formats"] == {"empty": 2}


def test_one_empty_answer_among_others_is_not_an_error(tmp_path: Path) -> None:
    def script(body: dict[str, Any], n: int) -> Reply | None:
        return Reply(content="") if SENTENCES[0] in body["messages"][0]["content"] else None

    with FakeOpenAIServer(script) as server:
        result = generate_pairs(SENTENCES, tmp_path / "p.jsonl", _config(server, tmp_path))
    assert result.complete and len(result.records) == 3 and result.summary["nothing_generated"] is False


def test_cli_every_answer_empty_exits_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    with FakeOpenAIServer(lambda b, n: Reply(content="")) as server:
        argv = ["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--llm", f"openai:m@{server.url}", "--quiet"]
        rc, _, err = helpers.run_cli(argv, capsys)
    assert rc == 2 and "answers of" in err and "is empty; no pairs file" in err and err.count("\n") == 1, err
    assert not (tmp_path / "p.jsonl").exists()


@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_cli_cache_naming_a_file_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n")
    blocker = tmp_path / "cache.txt"
    blocker.write_text("not a folder\n")
    cache = blocker if where == "file" else blocker / "sub"
    with FakeOpenAIServer() as server:
        argv = ["generate", "--input", str(source), "--output", str(tmp_path / "p.jsonl"), "--llm", f"openai:m@{server.url}", "--quiet", "--cache", str(cache)]
        rc, _, err = helpers.run_cli(argv, capsys)
        assert server.log == []
    assert rc == 2 and f"--cache {cache}: {blocker} is a file, not a folder" in err and "Errno" not in err and err.count("\n") == 1, err
    assert blocker.read_text() == "not a folder\n" and not (tmp_path / "p.jsonl").exists()


def test_the_default_cache_being_a_file_says_so(tmp_path: Path) -> None:
    (tmp_path / "p.jsonl.cache").write_text("x")
    with FakeOpenAIServer() as server:
        with pytest.raises(ConfigError, match=r"the answer cache .*p\.jsonl\.cache \(the default of --cache: <output>\.cache\): .* is a file"):
            generate_pairs(SENTENCES, tmp_path / "p.jsonl", _config(server, tmp_path, cache_dir=None))
        assert server.log == []
