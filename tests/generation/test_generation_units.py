"""Prompts, answer parsing, cleaning, --llm specs, Retry-After and the cache key of anglekit.generation."""

from __future__ import annotations

import time
from email.utils import formatdate
from pathlib import Path

import pytest

from anglekit.errors import ConfigError
from anglekit.generation import PAPER_TEMPLATES, parse_answer, parse_llm_spec
from anglekit.generation.backends.openai_compat import parse_retry_after
from anglekit.generation.cache import AnswerCache, cache_key
from anglekit.generation.cleaning import CleaningConfig, clean_candidates, strip_candidate
from anglekit.generation.pipeline import GenerationConfig
from anglekit.generation.prompts import PromptTemplate, resolve_prompts


def test_paper_prompts_verbatim() -> None:
    prompts = resolve_prompts(("synonym", "antonym"))
    assert prompts["synonym"].render("A cat sits", 3) == (
        "You are a highly smart same-meaning sentence-generating system. Your job is to generate 3 synonymous "
        "sentences of a given input sentence. Input sentence: A cat sits. Output:"
    )
    assert "opposite-meaning" in PAPER_TEMPLATES["antonym"] and "3 antonym sentences" in prompts["antonym"].render("x", 3)
    assert prompts["synonym"].prompt_id == "paper-synonym"


def test_user_templates() -> None:
    prompts = resolve_prompts(("synonym",), {"synonym": "Paraphrase {text} {size} times."})
    assert prompts["synonym"].prompt_id.startswith("user-synonym-") and prompts["synonym"].render("hi", 2) == "Paraphrase hi 2 times."
    with pytest.raises(ConfigError, match=r"\{text\}"):
        PromptTemplate.user("synonym", "no placeholder")
    with pytest.raises(ConfigError, match="unknown field"):
        PromptTemplate.user("antonym", "{text} {lang}")
    with pytest.raises(ConfigError, match="unknown prompt kind"):
        resolve_prompts(("synonym",), {"paraphrase": "{text}"})


@pytest.mark.parametrize(
    ("answer", "items", "fmt"),
    [
        ("1. One here.\n2. Two here.", ["One here.", "Two here."], "numbered"),
        ("Here you go:\n1) One here.\n2) Two here.\nHope this helps!", ["One here.", "Two here."], "numbered"),
        ("1. One here. 2. Two here. 3. Three here.", ["One here.", "Two here.", "Three here."], "numbered"),
        ("- One here.\n- Two here.", ["One here.", "Two here."], "bulleted"),
        ('["One here.", "Two here."]', ["One here.", "Two here."], "json"),
        ('{"synonyms": ["One here.", "Two here."]}', ["One here.", "Two here."], "json"),
        ('[{"sentence": "One here."}, {"sentence": "Two here."}]', ["One here.", "Two here."], "json"),
        ('```json\n["One here.", "Two here."]\n```', ["One here.", "Two here."], "json"),
        ('{"sentences": ["One here.", "Two here.",', ["One here.", "Two here."], "json-malformed"),
        ('"One here." "Two here."', ["One here.", "Two here."], "quoted"),
        ("One here.\nTwo here.", ["One here.", "Two here."], "lines"),
        ("   \n", [], "empty"),
        ('{"result": {"synonyms": ["One here.", "Two here."]}}', ["One here.", "Two here."], "json"),
        ('{"output": {"items": [{"text": "One here.", "score": 0.9}, {"text": "Two here."}]}}', ["One here.", "Two here."], "json"),
        ('[["One here."], ["Two here."]]', ["One here.", "Two here."], "json"),
        ('[{"id": "a1", "s": "One here."}, {"id": "a2", "s": "Two here."}]', ["One here.", "Two here."], "json"),
        ('{"count": 2, "synonyms": ["One here.", "Two here."]}', ["One here.", "Two here."], "json"),
        ("[" * 3000 + "]" * 3000, [], "non-text"),
        ("42", [], "non-text"),
        ("3.5\n", [], "non-text"),
        ("-7", [], "non-text"),
        ("true", [], "non-text"),
        ('{"n": 3}', [], "non-text"),
        ("1. 2. 3.", [], "non-text"),
    ],
)
def test_parse_answer(answer: str, items: list[str], fmt: str) -> None:
    parsed = parse_answer(answer)
    assert [strip_candidate(i) for i in parsed.items] == items and parsed.format == fmt


def test_candidates_without_a_letter_are_dropped_as_no_words() -> None:
    kept, drops = clean_candidates(["42", "3.14", "12 % 34", "Straße 5 is closed.", "日本語の文です。"], "An input.")
    assert kept == ["Straße 5 is closed.", "日本語の文です。"] and drops == {"no words": 3}


def test_cleaning_counts_every_drop() -> None:
    kept, drops = clean_candidates(
        ['"A dog barks loudly."', "a dog barks loudly", "", "ok", "x" * 50, "The dog is barking.", "The dog is barking!", "The dog is barking."],
        "A dog barks loudly.",
        CleaningConfig(min_chars=3, max_chars=40, near_duplicate_ratio=0.95),
    )
    assert kept == ["The dog is barking."]
    assert drops == {"copy of input": 2, "empty": 1, "too short": 1, "too long": 1, "duplicate": 2}
    kept, drops = clean_candidates(["The dog is barking loudly now.", "The dog is barking loudly now!!"], "cat", CleaningConfig())
    assert kept == ["The dog is barking loudly now."] and drops == {"duplicate": 1}
    kept, drops = clean_candidates(["The dog is barking loudly now.", "The dogs is barking loudly now."], "cat", CleaningConfig())
    assert drops == {"near-duplicate of a candidate": 1}
    assert strip_candidate("3. Output: 'Hello there'") == "Hello there"


def test_llm_specs() -> None:
    spec = parse_llm_spec("openai:qwen2.5:7b@http://127.0.0.1:11434/v1/")
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "qwen2.5:7b", "http://127.0.0.1:11434/v1")
    assert parse_llm_spec("openai:gpt-4o-mini").base_url == "https://api.openai.com/v1"
    assert parse_llm_spec("openai:m", "http://h:1/v1").llm_id == "openai:m@http://h:1/v1"
    assert parse_llm_spec("hf:pypi:smollm2-135m-instruct").llm_id == "hf:pypi:smollm2-135m-instruct"
    for bad in ("gpt-4", "vllm:m", "hf:"):
        with pytest.raises(ConfigError):
            parse_llm_spec(bad)
    for blank in ("hf:   ", "openai:  @http://127.0.0.1:9/v1", "openai:\t", "openai:@http://h:1/v1"):
        with pytest.raises(ConfigError, match="model name is blank"):
            parse_llm_spec(blank)


def test_retry_after() -> None:
    assert parse_retry_after("2") == 2.0 and parse_retry_after(None) is None and parse_retry_after("soon") is None
    later = parse_retry_after(formatdate(time.time() + 30, usegmt=True))
    assert later is not None and 25 <= later <= 31


def test_config_checks() -> None:
    with pytest.raises(ConfigError):
        GenerationConfig(kinds=("paraphrase",))
    with pytest.raises(ConfigError):
        GenerationConfig(positive_label=0.0, negative_label=1.0)
    with pytest.raises(ConfigError):
        GenerationConfig(concurrency=0)


@pytest.mark.parametrize("name", ["positive_label", "negative_label", "temperature", "top_p", "timeout", "backoff_max", "price_prompt"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_config_numbers_must_be_finite(name: str, value: float) -> None:
    """NaN passes every range comparison: a nan label would be written into every pair."""
    with pytest.raises(ConfigError, match=f"{name} must be a finite number"):
        GenerationConfig(**{name: value})


def test_cache_roundtrip_and_corrupt_entry(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    key = cache_key("openai:m@u", "prompt", "input", {"temperature": 0.7})
    assert key != cache_key("openai:n@u", "prompt", "input", {"temperature": 0.7})
    assert cache.get(key) is None
    cache.put(key, {"answer": "1. a"})
    assert cache.get(key) == {"answer": "1. a"}
    (tmp_path / key[:2] / f"{key}.json").write_text("{torn")
    assert cache.get(key) is None and cache.corrupt == 1


def test_an_antonym_that_negates_its_input_is_kept() -> None:
    source = "A man is spreading shredded cheese on a pizza."
    negation = "A man is not spreading shredded cheese on a pizza."
    kept, drops = clean_candidates([negation, "A woman is eating a salad."], source, CleaningConfig(), kind="antonym")
    assert kept == [negation, "A woman is eating a salad."] and not drops
    # as a synonym the same sentence is a near-copy of its input, dropped and counted
    kept, drops = clean_candidates([negation], source, CleaningConfig(), kind="synonym")
    assert kept == [] and drops == {"near-duplicate of input": 1}
    # an exact copy is no antonym; near-copies of another antonym still go
    kept, drops = clean_candidates([source, negation, negation.replace("pizza", "pizzas")], source, CleaningConfig(), kind="antonym")
    assert kept == [negation] and drops == {"copy of input": 1, "near-duplicate of a candidate": 1}


class _Bar:
    """A progress bar that draws nothing."""

    def update(self, n: int) -> None: ...
    def set_postfix(self, **kwargs: object) -> None: ...


def _drive_until_ctrl_c(pipeline, tasks, run, progress) -> None:  # type: ignore[no-untyped-def]
    """Drive ``tasks`` on one worker, expecting the Ctrl-C the test arranged."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    executor = ThreadPoolExecutor(max_workers=1)
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline._drive(executor, 1, tasks, run, progress, threading.Event(), _Bar(), pipeline._Stats())
    finally:
        executor.shutdown(wait=True)


def test_a_request_done_when_ctrl_c_lands_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race CI met: the only worker finishes task 0 and starts task 1 (which hangs), and the
    Ctrl-C reaches the main thread before it has counted task 0. Task 0's answer is cached, so its
    pairs must be written too: the interrupted drive still records it."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from anglekit.generation import pipeline

    release = threading.Event()
    tasks = [pipeline._Task(i, f"text {i}", 0, "synonym") for i in range(3)]

    def run(task: pipeline._Task) -> tuple[dict[str, str], bool]:
        if task.index == 1:
            release.wait(30)
        return {"answer": f"answer {task.index}"}, False

    def interrupted_wait(futures: object, return_when: object) -> None:
        first = next(f for f, t in dict(futures).items() if t.index == 0)  # type: ignore[call-overload]
        first.result(timeout=30)  # task 0 is done, its answer cached; the signal lands before it is counted
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "wait", interrupted_wait)
    progress = pipeline._Progress()
    executor = ThreadPoolExecutor(max_workers=1)
    try:
        with pytest.raises(KeyboardInterrupt):
            pipeline._drive(executor, 1, tasks, run, progress, threading.Event(), _Bar(), pipeline._Stats())
    finally:
        release.set()
        executor.shutdown(wait=True)
    assert list(progress.answers) == [tasks[0]] and progress.counters["sent"] == 1


@pytest.mark.parametrize("lands", ["before it is counted", "after it is counted"])
def test_a_ctrl_c_around_the_counting_of_a_request_counts_it_once(monkeypatch: pytest.MonkeyPatch, lands: str) -> None:
    """The window noted since stop 51: a Ctrl-C landing while a finished request is being counted. Before
    the count, the interrupted drive records it; after it, not again: its answer is in the summary once."""
    from anglekit.generation import pipeline

    tasks = [pipeline._Task(i, f"text {i}", 0, "synonym") for i in range(2)]
    real_record = pipeline._record
    fired = []

    def record(future, task, progress, stopping, pending):  # type: ignore[no-untyped-def]
        if not fired:
            fired.append(task)
            if lands == "after it is counted":
                real_record(future, task, progress, stopping, pending)
            raise KeyboardInterrupt
        real_record(future, task, progress, stopping, pending)

    monkeypatch.setattr(pipeline, "_record", record)
    progress = pipeline._Progress()
    _drive_until_ctrl_c(pipeline, tasks, lambda t: ({"answer": f"a {t.index}", "usage": {"completion_tokens": 3}}, False), progress)
    assert fired and fired[0] in progress.answers
    assert progress.counters["sent"] == len(progress.answers) and progress.usage["completion_tokens"] == 3 * len(progress.answers)


def test_the_summary_counts_follow_from_the_outcomes() -> None:
    from anglekit.generation import pipeline
    from anglekit.generation.backends import BackendError

    progress = pipeline._Progress()
    tasks = [pipeline._Task(i, f"text {i}", 0, "synonym") for i in range(14)]
    progress.outcomes[tasks[0]] = ({"answer": "x", "usage": {"prompt_tokens": 5, "completion_tokens": 2, "note": "n/a"}}, False)
    progress.outcomes[tasks[1]] = ({"answer": "y", "usage": {"prompt_tokens": 7}}, True)  # a cache hit costs nothing now
    for task in tasks[2:]:
        progress.outcomes[task] = BackendError(f"failed {task.index}")
    assert progress.counters == {"sent": 1, "cache_hits": 1, "failed": 12}
    assert progress.usage == {"prompt_tokens": 5, "completion_tokens": 2}
    assert progress.errors == [f"failed {i}" for i in range(2, 12)] and list(progress.answers) == tasks[:2]
