"""The generation run: inputs x LLMs x kinds -> cached answers -> parsed, cleaned pairs -> JSONL + summary.

Flow per (input, LLM, kind): render the prompt, look the answer up in the cache, else ask the
backend (bounded concurrency, retries inside the backend) and cache the answer at once. When every
request is done (or the run is interrupted, or some requests failed for good) the pairs of all
answers at hand are written atomically to ``out`` in a deterministic order (input, LLM, kind,
position in the answer), and a summary to ``<out>.summary.json``. A rerun with the same cache asks
only for what is missing and rewrites the complete file: no request is repeated, no pair is lost or
duplicated.

Each output line: ``{"text1": input, "text2": generated, "label": positive|negative label,
"llm": LLM id, "prompt_id": ..., "kind": "synonym"|"antonym", "answer_sha256": sha256 of the raw
answer}``; ``anglekit.data.readers.read_pairs`` reads it (the provenance fields are ignored).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any

from anglekit.config import check_fields, same_setting, setting
from anglekit.errors import ConfigError, NothingGeneratedError
from anglekit.generation.backends import Backend, BackendError, GenerationParams, make_backend, parse_llm_spec
from anglekit.generation.backends.openai_compat import RetryPolicy
from anglekit.generation.cache import AnswerCache, cache_key
from anglekit.generation.cleaning import CleaningConfig, clean_candidates, normalize
from anglekit.generation.parsing import parse_answer
from anglekit.generation.prompts import KINDS, PromptTemplate, resolve_prompts
from anglekit.io.atomic import atomic_write, atomic_write_json
from anglekit.model.load_settings import DTYPE_CHOICES, device_name

logger = logging.getLogger("anglekit.generation")


HF_OPTIONS = ("device", "dtype", "revision", "trust_remote_code", "batch_size")
"""The settings that apply to ``hf:`` LLMs only (the options of their backend)."""


@dataclass
class GenerationConfig:
    """Everything a generation run is told, typed: each field is a setting (help, default, range,
    choices) and ``anglekit generate`` generates its flags from them. The sampling, cleaning and retry
    settings are declared once, on :class:`~anglekit.generation.backends.GenerationParams`,
    :class:`~anglekit.generation.cleaning.CleaningConfig` and
    :class:`~anglekit.generation.backends.openai_compat.RetryPolicy`, and held here flat."""

    llms: list[str] = setting(
        default_factory=list,
        key="llm",
        metavar="SPEC",
        help="openai:MODEL[@BASE_URL] (any OpenAI-compatible server: vLLM, llama.cpp, Ollama, hosted APIs) or hf:NAME "
        "(in-process transformers: hub name, folder, .gguf, pypi:smollm2-135m-instruct); repeat for an ensemble",
    )
    kinds: tuple[str, ...] = setting(KINDS, choices=KINDS, help="the pairs to generate: synonym (positive pairs), antonym (negative pairs)")
    size: int = setting(3, minimum=1, help="sentences (--kind queries: queries) asked for per prompt ({size}); at most this many kept from each answer")
    templates: dict[str, str] = setting(default_factory=dict, help="templates per kind, with {text} (and {size}) (default: the paper's)")
    positive_label: float = setting(1.0, help="label of (input, synonym) pairs")
    negative_label: float = setting(0.0, help="label of (input, antonym) pairs")
    concurrency: int = setting(4, minimum=1, help="requests in flight at most (hf: backends run one at a time)")
    max_retries: int = same_setting(RetryPolicy, "max_retries")
    timeout: float = same_setting(RetryPolicy, "timeout")
    backoff_base: float = same_setting(RetryPolicy, "backoff_base")
    backoff_max: float = same_setting(RetryPolicy, "backoff_max")
    max_repeated_errors: int = same_setting(RetryPolicy, "max_repeated_errors")
    temperature: float = same_setting(GenerationParams, "temperature")
    top_p: float = same_setting(GenerationParams, "top_p")
    max_tokens: int = same_setting(GenerationParams, "max_tokens")
    seed: int | None = same_setting(GenerationParams, "seed", default=0)  # a run is seeded unless told otherwise
    min_chars: int = same_setting(CleaningConfig, "min_chars")
    max_chars: int = same_setting(CleaningConfig, "max_chars")
    near_duplicate_ratio: float = same_setting(CleaningConfig, "near_duplicate_ratio")
    api_key_env: str = setting("OPENAI_API_KEY", help="environment variable holding the API key (never passed as a flag)")
    base_url: str | None = setting(None, help="base URL for openai: specs without @URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1)")
    cache_dir: str | None = setting(None, key="cache", help="answer cache folder (default: <output>.cache/)")
    price_prompt: float | None = setting(None, minimum=0, help="cost per 1M prompt tokens, for the cost summary")
    price_completion: float | None = setting(None, minimum=0, help="cost per 1M completion tokens")
    device: str | None = setting(
        None, parse=device_name, metavar="DEVICE", help="hf: backends: cpu, cuda, cuda:N or mps (default: cuda when available, else cpu)"
    )
    dtype: str | None = setting(None, choices=DTYPE_CHOICES, help="hf: backends: load the weights in this dtype (default: as stored)")
    revision: str | None = setting(None, help="hf: backends: hub revision of the model: branch, tag or commit (default: the main branch)")
    trust_remote_code: bool = setting(False, help="hf: backends: run the model repository's own code")
    batch_size: int = setting(1, minimum=1, metavar="N", help="hf: backends: prompts per generate call (batches concurrent requests)")
    progress: bool = setting(True, help="show a progress bar")

    def __post_init__(self) -> None:
        for name in (
            "positive_label",
            "negative_label",
            "temperature",
            "top_p",
            "timeout",
            "backoff_base",
            "backoff_max",
            "near_duplicate_ratio",
            "price_prompt",
            "price_completion",
        ):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):  # nan passes every comparison below
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        # The types, ranges and choices the fields declare; llms are checked as the backends are made
        # (none when backends are given to generate_pairs).
        check_fields(self, exclude=("llms",))
        if "synonym" in self.kinds and "antonym" in self.kinds and self.positive_label <= self.negative_label:
            raise ConfigError(f"positive_label ({self.positive_label}) must be greater than negative_label ({self.negative_label})")
        self.cleaning()  # min_chars <= max_chars, found now rather than when the answers are cleaned

    def params(self) -> GenerationParams:
        return GenerationParams(**self._fields_of(GenerationParams))

    def cleaning(self) -> CleaningConfig:
        return CleaningConfig(**self._fields_of(CleaningConfig))

    def retry(self) -> RetryPolicy:
        return RetryPolicy(**self._fields_of(RetryPolicy))

    def _fields_of(self, part: type) -> dict[str, Any]:
        """The values of the settings of ``part`` that this config holds (the others keep ``part``'s defaults)."""
        return {f.name: getattr(self, f.name) for f in fields(part) if hasattr(self, f.name)}


@dataclass
class GenerationResult:
    out: Path
    summary: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def complete(self) -> bool:
        return bool(self.summary["complete"])


@dataclass(frozen=True)
class _Task:
    index: int
    text: str
    llm: int
    kind: str


Task = _Task
"""One request: input ``index`` (its ``text``), LLM ``llm`` (an index into the backends), prompt ``kind``."""


class _Skipped(Exception):
    """A request not sent because the run is stopping (a fatal error came back)."""


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.retries: Counter[str] = Counter()
        self.retry_wait = 0.0

    def on_retry(self, reason: str, wait_s: float) -> None:
        with self.lock:
            self.retries[reason] += 1
            self.retry_wait += wait_s


def summary_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".summary.json")


def default_cache_dir(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".cache")


def build_backends(config: GenerationConfig, stats: _Stats | None = None) -> list[Backend]:
    if not config.llms:
        raise ConfigError("no LLM given: pass --llm openai:MODEL@URL or hf:NAME (repeat for an ensemble)")
    specs = [parse_llm_spec(s, config.base_url) for s in config.llms]
    ids = [s.llm_id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"the same LLM is given twice: {ids}")
    retry = config.retry()
    backends: list[Backend] = []
    for spec in specs:
        if spec.kind == "openai":
            options: dict[str, Any] = {"api_key_env": config.api_key_env, "retry": retry}
            if stats is not None:
                options["on_retry"] = stats.on_retry
        else:
            options = {name: getattr(config, name) for name in HF_OPTIONS}
        backends.append(make_backend(spec, **options))
    return backends


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def generate_pairs(
    texts: Sequence[str],
    out: str | Path,
    config: GenerationConfig,
    *,
    backends: Sequence[Backend] | None = None,
) -> GenerationResult:
    """Generate pairs for ``texts`` with ``config.llms`` (or the given ``backends``) into ``out``.

    Returns the summary and the records written. Requests that fail for good are counted in the
    summary (``requests.failed``) and their inputs are missing from the output; rerun to retry
    them. A ``KeyboardInterrupt`` writes what is done (``summary["complete"] = False``), then re-raises.
    Answers that are all empty raise :class:`~anglekit.errors.NothingGeneratedError` after the
    summary is written, and no pairs file is written. A ``--cache`` (``config.cache_dir``) that is a
    file is a ConfigError before any request.
    """
    out = Path(out)
    prompts = resolve_prompts(tuple(config.kinds), config.templates)
    requests = start_requests(config, out, backends)
    unique = list(dict.fromkeys(texts))  # each input once, in first-seen order
    tasks = [_Task(i, t, b, k) for i, t in enumerate(unique) for b in range(len(requests.backends)) for k in config.kinds]
    try:
        run_requests(requests, tasks, prompts, config)
    finally:
        result = _finish(out, config, unique, len(texts), requests, prompts, tasks)
    progress = requests.progress
    if progress.fatal is not None:
        raise progress.fatal
    if result.summary.get("nothing_generated"):
        raise NothingGeneratedError(
            f"{out}: every one of the {len(progress.answers)} answers of {', '.join(b.llm_id for b in requests.backends)} is empty; "
            "no pairs file is written (raise --max-tokens, or try another model or prompt; the summary is in "
            f"{summary_path(out)})"
        )
    return result


@dataclass
class RequestRun:
    """The requests of one generation run: the backends asked, the answer cache, what came back
    (``progress``), the retry counts, whether a Ctrl-C stopped it, and its clock (``started`` after
    the backends are loaded, which took ``load_s``)."""

    backends: Sequence[Backend]
    cache: AnswerCache
    stats: _Stats
    started: float
    load_s: float
    progress: _Progress = field(default_factory=lambda: _Progress())
    interrupted: bool = False

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def start_requests(config: GenerationConfig, out: Path, backends: Sequence[Backend] | None = None) -> RequestRun:
    """Check the cache folder (a ConfigError naming ``--cache`` when it is a file), then make the
    backends of ``config.llms`` (or take ``backends``) and open the cache."""
    loading = time.monotonic()
    cache_dir = _check_cache_dir(config.cache_dir, out)
    stats = _Stats()
    if backends is None:
        backends = build_backends(config, stats)
    else:
        for backend in backends:
            if hasattr(backend, "on_retry") and backend.on_retry is None:
                backend.on_retry = stats.on_retry  # type: ignore[attr-defined]
    cache = AnswerCache(cache_dir)
    started = time.monotonic()
    return RequestRun(backends, cache, stats, started, started - loading)


def run_requests(requests: RequestRun, tasks: list[_Task], prompts: dict[str, Any], config: GenerationConfig, *, desc: str = "generate") -> None:
    """Answer ``tasks`` (``prompts[task.kind]`` renders each one's prompt) from the cache or the
    backends, at most ``config.concurrency`` at a time, into ``requests.progress``. A Ctrl-C sets
    ``requests.interrupted`` and is re-raised; what was answered before it is kept."""
    stopping = threading.Event()
    params = config.params()
    backends = requests.backends
    run = partial(_answer, backends=backends, prompts=prompts, size=config.size, params=params, cache=requests.cache, stopping=stopping)
    from tqdm.auto import tqdm

    bar = tqdm(total=len(tasks), disable=not config.progress, unit="req", desc=desc, dynamic_ncols=True)
    workers = max(config.concurrency, *(getattr(b, "batch_size", 1) for b in backends))
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="anglekit-generate")
    try:
        _drive(executor, workers, tasks, run, requests.progress, stopping, bar, requests.stats)
    except KeyboardInterrupt:
        requests.interrupted = True
        raise
    finally:
        executor.shutdown(wait=not requests.interrupted, cancel_futures=True)
        bar.close()


def request_summary(requests: RequestRun, tasks: list[_Task]) -> dict[str, Any]:
    """The summary's ``requests`` entry: total, answered, sent, cache hits, failed, not run, retries."""
    answers = requests.progress.answers
    counters = requests.progress.counters
    stats = requests.stats
    return {
        "total": len(tasks),
        "answered": len(answers),
        "sent": counters["sent"],
        "cache_hits": counters["cache_hits"],
        "failed": counters["failed"],
        "not_run": len(tasks) - len(answers) - counters["failed"],
        "retries": sum(stats.retries.values()),
        "retries_by_reason": dict(stats.retries),
        "retry_wait_s": round(stats.retry_wait, 3),
        "cache_corrupt": requests.cache.corrupt,
    }


def usage_and_cost(requests: RequestRun, config: GenerationConfig) -> tuple[dict[str, int] | None, float | None]:
    """The token usage of the requests sent in this run (None when no server reported it) and its
    cost at ``--price-prompt`` / ``--price-completion`` (None without prices)."""
    usage = requests.progress.usage
    cost = None
    if config.price_prompt is not None or config.price_completion is not None:
        cost = usage["prompt_tokens"] / 1e6 * (config.price_prompt or 0.0) + usage["completion_tokens"] / 1e6 * (config.price_completion or 0.0)
    return ({"prompt_tokens": usage["prompt_tokens"], "completion_tokens": usage["completion_tokens"]} if usage else None), cost


def _check_cache_dir(cache_dir: str | None, out: Path) -> Path:
    """The answer cache's folder (``--cache``, else ``<output>.cache``), or a ConfigError naming the
    flag when it is a file (checked before any backend is made or request sent)."""
    if cache_dir is not None and (not isinstance(cache_dir, str) or not cache_dir.strip()):
        raise ConfigError(f"--cache {cache_dir!r}: expected a folder path")
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir(out)
    where = f"--cache {path}" if cache_dir is not None else f"the answer cache {path} (the default of --cache: <output>.cache)"
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            raise ConfigError(f"{where}: {part} is a file, not a folder; name a folder for the answer cache")
        if part.exists():
            break
    return path


@dataclass
class _Progress:
    """What the requests of one generation have given so far. Each finished request's outcome (its
    cache entry and whether it was a cache hit, or its failure) is stored in ``outcomes`` by one
    assignment, which a Ctrl-C lands before or after, never halfway; the answers, counts, token usage
    and errors of the summary follow from them. ``shown`` is only the progress bar's running tally."""

    outcomes: dict[_Task, tuple[dict[str, Any], bool] | BackendError] = field(default_factory=dict)
    shown: Counter[str] = field(default_factory=Counter)
    fatal: BackendError | None = None

    @property
    def answers(self) -> dict[_Task, dict[str, Any]]:
        return {task: outcome[0] for task, outcome in self.outcomes.items() if isinstance(outcome, tuple)}

    @property
    def counters(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for outcome in self.outcomes.values():
            counts[_counted_as(outcome)] += 1
        return counts

    @property
    def usage(self) -> Counter[str]:
        """Token usage of the requests sent (cache hits cost nothing this run)."""
        total: Counter[str] = Counter()
        for outcome in self.outcomes.values():
            if isinstance(outcome, tuple) and not outcome[1]:
                total.update({k: v for k, v in outcome[0].get("usage", {}).items() if isinstance(v, int)})
        return total

    @property
    def errors(self) -> list[str]:
        """The first 10 failures' messages."""
        return [str(outcome) for outcome in self.outcomes.values() if isinstance(outcome, BackendError)][:10]


def _counted_as(outcome: tuple[dict[str, Any], bool] | BackendError) -> str:
    """The summary's count a request's outcome adds to: ``failed``, ``cache_hits`` or ``sent``."""
    return "failed" if isinstance(outcome, BackendError) else "cache_hits" if outcome[1] else "sent"


def _drive(executor: ThreadPoolExecutor, workers: int, tasks: list[_Task], run: Callable[[_Task], tuple[dict[str, Any], bool]],
           progress: _Progress, stopping: threading.Event, bar: Any, stats: _Stats) -> None:  # fmt: skip
    """Run the tasks on ``executor``, at most 2 x ``workers`` submitted at a time (a Ctrl-C leaves
    little to cancel); a fatal backend error stops sending (the rest count as not run)."""
    pending: dict[Future[tuple[dict[str, Any], bool]], _Task] = {}
    queue = iter(tasks)

    def refill() -> None:
        while len(pending) < 2 * workers and progress.fatal is None:
            task = next(queue, None)
            if task is None:
                return
            pending[executor.submit(run, task)] = task

    try:
        refill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                _record(future, pending[future], progress, stopping, pending)
                del pending[future]  # only once recorded: a Ctrl-C in between finds it still pending, and recorded
                bar.update(1)
                shown = progress.shown
                bar.set_postfix(cached=shown["cache_hits"], retries=sum(stats.retries.values()), failed=shown["failed"], refresh=False)
            refill()
    except KeyboardInterrupt:
        for future, task in list(pending.items()):
            if future.done() and not future.cancelled():  # finished before the signal was handled
                if task not in progress.outcomes:
                    _record(future, task, progress, stopping, pending)  # its answer is cached: write its pairs too
            else:
                future.cancel()
        pending.clear()
        raise


def _record(future: Future[tuple[dict[str, Any], bool]], task: _Task, progress: _Progress, stopping: threading.Event,
            pending: dict[Future[tuple[dict[str, Any], bool]], _Task]) -> None:  # fmt: skip
    """Count one finished request: its answer, or its failure (a fatal one cancels what is queued)."""
    try:
        outcome: tuple[dict[str, Any], bool] | BackendError = future.result()
    except _Skipped:
        return
    except BackendError as exc:
        outcome = exc
        _log_failure(exc)
    progress.outcomes[task] = outcome  # the one step that counts it (see _Progress)
    progress.shown[_counted_as(outcome)] += 1
    if isinstance(outcome, BackendError) and getattr(outcome, "fatal", False) and progress.fatal is None:
        progress.fatal = outcome
        stopping.set()  # every other request would fail alike: send no more (they count as not run)
        for queued in [f for f in pending if f.cancel()]:
            del pending[queued]


def _answer(
    task: _Task,
    *,
    backends: Sequence[Backend],
    prompts: dict[str, PromptTemplate],
    size: int,
    params: Any,
    cache: AnswerCache,
    stopping: threading.Event,
) -> tuple[dict[str, Any], bool]:
    """One request's cache entry and whether it came from the cache; ``_Skipped`` once ``stopping`` is set."""
    backend = backends[task.llm]
    template = prompts[task.kind]
    prompt = template.render(task.text, size)
    key = cache_key(backend.llm_id, prompt, task.text, params.as_dict())
    entry = cache.get(key)
    if entry is not None:
        return entry, True
    if stopping.is_set():
        raise _Skipped
    try:
        completion = backend.complete(prompt, params)
    except BackendError as exc:
        if exc.fatal:  # set here, in the worker, so that no request starts after it
            stopping.set()
        raise
    entry = {
        "llm": backend.llm_id, "prompt_id": template.prompt_id, "kind": task.kind, "input": task.text, "answer": completion.text,
        "usage": completion.usage, "params": params.as_dict(),
    }  # fmt: skip
    cache.put(key, entry)
    return entry, False


def _log_failure(exc: BackendError) -> None:
    logger.warning("request failed: %s", exc)


def _records(
    config: GenerationConfig, backends: Sequence[Backend], prompts: dict[str, PromptTemplate], tasks: list[_Task], answers: dict[_Task, dict[str, Any]]
) -> tuple[list[dict[str, Any]], Counter[str], dict[str, Counter[str]], Counter[str], int]:
    """The pairs of the answers, in task order, cleaned, at most ``size`` per task, each sentence once per
    input and kind, and none offered as a synonym and an antonym at once: (records, drops, drops by
    kind, answer formats, candidates)."""
    cleaning = config.cleaning()
    drops: Counter[str] = Counter()
    drops_by_kind: dict[str, Counter[str]] = {kind: Counter() for kind in config.kinds}
    formats: Counter[str] = Counter()
    labels = {"synonym": config.positive_label, "antonym": config.negative_label}
    candidates_total = 0
    records: list[dict[str, Any]] = []
    owner: dict[tuple[int, str, str], int] = {}  # (input, kind, normalised text2) -> first record
    for task in tasks:  # deterministic order: input, LLM, kind
        entry = answers.get(task)
        if entry is None:
            continue
        answer = entry["answer"]
        parsed = parse_answer(answer)
        formats[parsed.format] += 1
        candidates_total += len(parsed.items)
        kept, dropped = clean_candidates(parsed.items, task.text, cleaning, kind=task.kind)
        drops.update(dropped)
        drops_by_kind[task.kind].update(dropped)
        if len(kept) > config.size:
            drops["beyond size"] += len(kept) - config.size
            drops_by_kind[task.kind]["beyond size"] += len(kept) - config.size
            kept = kept[: config.size]
        llm_id = backends[task.llm].llm_id
        digest = _sha256(answer)
        for text2 in kept:
            key = (task.index, task.kind, normalize(text2))
            if key in owner:
                drops["duplicate across llms"] += 1
                drops_by_kind[task.kind]["duplicate across llms"] += 1
                continue
            owner[key] = len(records)
            records.append(
                {
                    "text1": task.text,
                    "text2": text2,
                    "label": labels[task.kind],
                    "llm": llm_id,
                    "prompt_id": prompts[task.kind].prompt_id,
                    "kind": task.kind,
                    "answer_sha256": digest,
                }
            )
    # The same sentence offered as a synonym and as an antonym of one input: no usable label.
    both = {(idx, norm) for (idx, kind, norm) in owner if kind == "synonym" and (idx, "antonym", norm) in owner}
    conflicts = {owner[(idx, kind, norm)] for idx, norm in both for kind in ("synonym", "antonym")}
    if conflicts:
        drops["synonym and antonym at once"] += len(conflicts)
        for i in conflicts:
            drops_by_kind[records[i]["kind"]]["synonym and antonym at once"] += 1
        records = [r for i, r in enumerate(records) if i not in conflicts]
    return records, drops, drops_by_kind, formats, candidates_total


def _finish(
    out: Path,
    config: GenerationConfig,
    unique: list[str],
    n_given: int,
    requests: RequestRun,
    prompts: dict[str, PromptTemplate],
    tasks: list[_Task],
) -> GenerationResult:
    backends = requests.backends
    answers = requests.progress.answers
    interrupted = requests.interrupted
    records, drops, drops_by_kind, formats, candidates_total = _records(config, backends, prompts, tasks, answers)
    per_llm: dict[str, Counter[str]] = {b.llm_id: Counter() for b in backends}
    for record in records:
        per_llm[record["llm"]][record["kind"]] += 1

    def write(handle: Any) -> None:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")

    nothing = bool(answers) and not interrupted and all(not str(entry.get("answer", "")).strip() for entry in answers.values())
    if not nothing:  # every answer empty: no pairs file (generate_pairs raises NothingGeneratedError)
        atomic_write(out, write)
    elapsed = requests.elapsed
    done_inputs = len({t.index for t in answers})
    usage, cost = usage_and_cost(requests, config)
    summary: dict[str, Any] = {
        "out": str(out),
        "complete": len(answers) == len(tasks) and not interrupted and not nothing,
        "nothing_generated": nothing,
        "interrupted": interrupted,
        "llms": [b.llm_id for b in backends],
        "prompts": {kind: {"prompt_id": p.prompt_id, "template": p.template} for kind, p in prompts.items()},
        "size": config.size,
        "labels": {"positive": config.positive_label, "negative": config.negative_label},
        "inputs": {"given": n_given, "unique": len(unique), "duplicate": n_given - len(unique), "done": done_inputs},
        "requests": request_summary(requests, tasks),
        "errors": requests.progress.errors,
        "answer_formats": dict(formats),
        "candidates": candidates_total,
        "drops": dict(drops),
        "drops_by_kind": {kind: dict(counter) for kind, counter in drops_by_kind.items()},
        "pairs": {
            "total": len(records),
            "positive": sum(r["kind"] == "synonym" for r in records),
            "negative": sum(r["kind"] == "antonym" for r in records),
            "per_llm": {k: dict(v) for k, v in per_llm.items()},
        },
        "usage": usage,
        "cost": cost,
        "load_s": round(requests.load_s, 3),
        "elapsed_s": round(elapsed, 3),
        "throughput_note": "elapsed_s, sentences_per_s and requests_per_s exclude loading the backends (load_s) and count cache hits as done",
        "sentences_per_s": round(done_inputs / elapsed, 4) if elapsed > 0 else None,
        "requests_per_s": round(len(answers) / elapsed, 4) if elapsed > 0 else None,
        "config": {k: v for k, v in asdict(config).items() if k not in ("progress",)},
    }
    atomic_write_json(summary_path(out), summary)
    return GenerationResult(out, summary, records)


__all__ = [
    "HF_OPTIONS",
    "GenerationConfig",
    "GenerationResult",
    "RequestRun",
    "Task",
    "build_backends",
    "default_cache_dir",
    "generate_pairs",
    "request_summary",
    "run_requests",
    "start_requests",
    "summary_path",
    "usage_and_cost",
]
