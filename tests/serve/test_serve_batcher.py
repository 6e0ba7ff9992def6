"""The dynamic batcher on its own (no HTTP): results against Embedder.encode, how batches are
formed, bounds, failures, shutdown."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from anglekit.serve.batcher import Batcher
from anglekit.serve.errors import ContextLengthExceeded, InternalError, InvalidRequest, NotReady, QueueFull

from serving import Gate, sentences, wait_for

TOL = {"rtol": 1e-5, "atol": 1e-5}


def started(backend: Any, **limits: Any) -> Batcher:
    limits = {"max_batch_tokens": 16384, "max_batch_size": 64, "max_queue": 100_000, **limits}
    batcher = Batcher(backend, **limits)
    batcher.warmup()
    if isinstance(backend, Gate):
        backend.batches.clear()
    batcher.start()
    return batcher


def waited(batcher: Batcher) -> int:
    """How many times the worker waited for answered clients to come back (from its metrics)."""
    text = batcher.metrics.render().decode()
    return int(float(next(line.split()[1] for line in text.splitlines() if line.startswith("anglekit_return_wait_seconds_count"))))


def token_count(reference: Any, texts: Sequence[str]) -> int:
    return sum(len(ids) for ids in reference.tokenize_unpadded(texts))


def test_vectors_equal_encode_in_input_order(tiny_backend: Callable[..., Any], reference: Any) -> None:
    batcher = started(tiny_backend(), max_batch_tokens=300, max_batch_size=8)
    groups = [sentences(n, seed=n) for n in (1, 3, 17, 40, 2, 64)]

    async def main() -> list[Any]:
        return await asyncio.gather(*(batcher.embed(group) for group in groups))

    try:
        results = asyncio.run(main())
    finally:
        batcher.close()
    for group, result in zip(groups, results, strict=False):
        assert result.vectors.shape == (len(group), reference.dim)
        np.testing.assert_allclose(result.vectors, reference.encode(group, normalize=False), rtol=1e-5, atol=1e-5)
        assert result.tokens == token_count(reference, group)


def test_batches_are_length_ordered_and_within_the_budget(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate, max_batch_tokens=200, max_batch_size=6)
    groups = [sentences(n, seed=100 + n, low=1, high=40) for n in (5, 9, 1, 14, 3, 22)]

    async def main() -> list[Any]:
        gate.hold()
        first = asyncio.ensure_future(batcher.embed(["the first request holds the worker"]))
        await asyncio.to_thread(gate.entered.wait, 60)
        rest = [asyncio.ensure_future(batcher.embed(group)) for group in groups]
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 1 + sum(map(len, groups)))
        gate.release()
        await first
        return list(await asyncio.gather(*rest))

    try:
        results = asyncio.run(main())
    finally:
        batcher.close()
    for group, result in zip(groups, results, strict=False):
        np.testing.assert_allclose(result.vectors, reference.encode(group, normalize=False), rtol=1e-5, atol=1e-5)
    batches = gate.batches[1:]
    assert sum(map(len, batches)) == sum(map(len, groups))
    for lengths in batches:
        assert len(lengths) <= 6
        assert lengths == sorted(lengths, reverse=True), "a batch is not ordered by length"
        assert len(lengths) == 1 or len(lengths) * max(lengths) <= 200, "a batch exceeds the token budget"
    # Sorting by length pads less than the arrival order would, with the same batch sizes.
    padded = sum(len(b) * max(b) for b in batches)
    arrival = [len(ids) for group in groups for ids in reference.tokenize_unpadded(group)]
    unsorted, start = 0, 0
    for b in batches:
        unsorted += len(b) * max(arrival[start : start + len(b)])
        start += len(b)
    assert padded <= unsorted


def test_concurrent_one_text_requests_share_a_forward_pass(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate)
    texts = sentences(32, seed=7)

    async def main() -> list[Any]:
        gate.hold()
        first = asyncio.ensure_future(batcher.embed(texts[:1]))
        await asyncio.to_thread(gate.entered.wait, 60)
        rest = [asyncio.ensure_future(batcher.embed([t])) for t in texts[1:]]
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 32)
        gate.release()
        return [await first, *await asyncio.gather(*rest)]

    try:
        results = asyncio.run(main())
    finally:
        batcher.close()
    assert [len(b) for b in gate.batches] == [1, 31]
    np.testing.assert_allclose(np.concatenate([r.vectors for r in results]), reference.encode(texts, normalize=False), rtol=1e-5, atol=1e-5)


def test_a_full_queue_refuses_with_retry_after_and_loses_nothing(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate, max_queue=10)
    texts = sentences(10, seed=3)

    async def main() -> Any:
        gate.hold()
        held = asyncio.ensure_future(batcher.embed(texts))
        await asyncio.to_thread(gate.entered.wait, 60)
        with pytest.raises(QueueFull) as refused:
            await batcher.embed(["one more"])
        assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
        gate.release()
        first = await held
        again = await batcher.embed(["one more"])  # room again
        return first, again

    try:
        first, again = asyncio.run(main())
    finally:
        batcher.close()
    np.testing.assert_allclose(first.vectors, reference.encode(texts, normalize=False), rtol=1e-5, atol=1e-5)
    assert again.vectors.shape == (1, reference.dim)
    assert batcher.queued == 0


def test_a_failing_batch_fails_its_requests_only(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate)
    marker = gate.tokenize(["piano"], None, truncate=True)[0][1]
    gate.fail_when = lambda ids: any(marker in seq for seq in ids)
    _fails_then_serves(batcher, reference, ["the piano breaks the model"], "broke on purpose")


def _fails_then_serves(batcher: Batcher, reference: Any, failing: list[str], match: str) -> None:
    """``failing`` fails with an InternalError matching ``match`` (within 60 s: never left waiting);
    the batcher then embeds other texts as usual, and closes with nothing queued."""
    others = ["a dog runs", "two cats sit"]

    async def main() -> Any:
        with pytest.raises(InternalError, match=match):
            await asyncio.wait_for(batcher.embed(failing), 60)
        return await batcher.embed(others)

    try:
        after = asyncio.run(main())
    finally:
        batcher.close()
    np.testing.assert_allclose(after.vectors, reference.encode(others, normalize=False), rtol=1e-5, atol=1e-5)
    assert batcher.queued == 0


class _Miscounting(Gate):
    """A backend that drops the last row, or the last coordinate, of a batch holding ``marker``."""

    def __init__(self, inner: Any, marker: int, cut: str) -> None:
        super().__init__(inner)
        self.marker, self.cut = marker, cut

    def embed(self, token_ids: Sequence[Sequence[int]], layer: int | None = None) -> np.ndarray:
        vectors = super().embed(token_ids)
        if any(self.marker in seq for seq in token_ids):
            return vectors[:-1] if self.cut == "row" else vectors[:, :-1]
        return vectors


@pytest.mark.parametrize("cut", ["row", "coordinate"])
def test_a_backend_answering_another_shape_fails_its_batch_at_once(tiny_backend: Callable[..., Any], reference: Any, cut: str) -> None:
    inner = tiny_backend()
    marker = inner.tokenize(["piano"], None, truncate=True)[0][1]
    batcher = started(_Miscounting(inner, marker, cut))
    _fails_then_serves(batcher, reference, ["the piano plays", "a dog runs", "two cats sit"], "the model returned vectors of shape")


class _BrittleTokenizer(Gate):
    def tokenize(self, texts: Sequence[str], role: Any, *, truncate: bool) -> list[list[int]]:
        if any("boom" in t for t in texts):
            raise ValueError("cannot tokenize boom")
        return super().tokenize(texts, role, truncate=truncate)


def test_a_text_the_tokenizer_rejects_fails_its_request_only(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = _BrittleTokenizer(tiny_backend())
    batcher = started(gate)
    good = [["a man plays"], ["boom goes the text"], ["the old dog", "a red car"]]

    async def main() -> list[Any]:
        gate.hold()
        first = asyncio.ensure_future(batcher.embed(["hold"]))
        await asyncio.to_thread(gate.entered.wait, 60)
        tasks = [asyncio.ensure_future(batcher.embed(texts)) for texts in good]  # tokenised together
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 1 + 4)
        gate.release()
        await first
        return list(await asyncio.gather(*tasks, return_exceptions=True))

    try:
        results = asyncio.run(main())
    finally:
        batcher.close()
    assert isinstance(results[1], InvalidRequest) and "cannot tokenize boom" in str(results[1])
    for i in (0, 2):
        np.testing.assert_allclose(results[i].vectors, reference.encode(good[i], normalize=False), rtol=1e-5, atol=1e-5)


def test_without_truncation_a_long_text_is_refused_with_its_token_count(tiny_backend: Callable[..., Any], reference: Any) -> None:
    batcher = started(tiny_backend())
    long_text = " ".join(["word"] * 300)
    count = len(reference.tokenizer(long_text)["input_ids"])
    assert count > reference.config.max_length

    async def main() -> Any:
        with pytest.raises(ContextLengthExceeded) as refused:
            await batcher.embed(["short", long_text], truncate=False)
        assert f"input[1] has {count} tokens" in refused.value.message
        assert str(reference.config.max_length) in refused.value.message
        return await batcher.embed(["short", long_text], truncate=True)

    try:
        truncated = asyncio.run(main())
    finally:
        batcher.close()
    np.testing.assert_allclose(truncated.vectors, reference.encode(["short", long_text], normalize=False), rtol=1e-5, atol=1e-5)


def test_close_finishes_every_accepted_request_then_refuses(tiny_backend: Callable[..., Any], reference: Any) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate, max_batch_size=2)
    groups = [sentences(n, seed=50 + n) for n in (1, 2, 5, 8)]

    async def main() -> list[Any]:
        gate.hold()
        tasks = [asyncio.ensure_future(batcher.embed(group)) for group in groups]
        await asyncio.to_thread(wait_for, lambda: batcher.queued == sum(map(len, groups)))
        closing = threading.Thread(target=batcher.close)
        closing.start()
        await asyncio.to_thread(wait_for, lambda: not batcher.accepting)
        with pytest.raises(NotReady):
            await batcher.embed(["too late"])
        gate.release()
        results = list(await asyncio.gather(*tasks))
        await asyncio.to_thread(closing.join, 60)
        assert not closing.is_alive()
        return results

    results = asyncio.run(main())
    for group, result in zip(groups, results, strict=False):
        np.testing.assert_allclose(result.vectors, reference.encode(group, normalize=False), rtol=1e-5, atol=1e-5)


def test_a_cancelled_request_is_not_embedded(tiny_backend: Callable[..., Any]) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate)

    async def main() -> None:
        gate.hold()
        held = asyncio.ensure_future(batcher.embed(["held"]))
        await asyncio.to_thread(gate.entered.wait, 60)
        gone = asyncio.ensure_future(batcher.embed(sentences(5, seed=9)))
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 6)
        gone.cancel()
        await asyncio.sleep(0)
        gate.release()
        await held
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 0)

    try:
        asyncio.run(main())
    finally:
        batcher.close()
    assert sum(map(len, gate.batches)) == 1


@pytest.mark.parametrize(("return_wait", "batches"), [(30.0, [1, 2]), (0.0, [1, 1, 1])])
def test_clients_just_answered_share_the_next_forward_pass(tiny_backend: Callable[..., Any], reference: Any, return_wait: float, batches: list[int]) -> None:
    gate = Gate(tiny_backend())
    batcher = started(gate, return_wait=return_wait)  # 30 s: generous, the returning client is never too late
    texts = sentences(3, seed=61)

    async def main() -> list[Any]:
        gate.hold()
        first = asyncio.ensure_future(batcher.embed(texts[:1]))
        await asyncio.to_thread(gate.entered.wait, 60)
        waiting = asyncio.ensure_future(batcher.embed(texts[1:2]))  # arrives while the first runs
        await asyncio.to_thread(wait_for, lambda: batcher.queued == 2)
        await asyncio.sleep(2.0)  # a long first window: the worker may then wait up to a quarter of it (0.5 s)
        gate.close_after = 1  # the next window stops at the gate, whichever texts it holds
        gate.release()
        answer = await first
        if not return_wait:  # no wait for returns: the next window (`waiting` alone) is formed at once
            await asyncio.to_thread(gate.entered.wait, 60)
        returning = asyncio.ensure_future(batcher.embed(texts[2:]))  # the first client comes back
        if return_wait:  # it joins `waiting` (sent at once, well inside the 0.5 s the worker waits)
            await asyncio.to_thread(gate.entered.wait, 60)
        gate.release()
        return [answer, await waiting, await returning]

    try:
        results = asyncio.run(main())
    finally:
        batcher.close()
    assert [len(b) for b in gate.batches] == batches
    np.testing.assert_allclose(np.concatenate([r.vectors for r in results]), reference.encode(texts, normalize=False), **TOL)


def test_a_lone_client_is_never_held_back(tiny_backend: Callable[..., Any]) -> None:
    batcher = started(tiny_backend(), return_wait=30.0)

    async def main() -> None:
        for i in range(4):  # one client: each request comes after the last answer
            await batcher.embed(sentences(2, seed=70 + i))

    try:
        asyncio.run(main())
    finally:
        batcher.close()
    assert waited(batcher) == 0, "it waited for clients that were not coming"


# ---------------------------------------------------------------- warming input shapes up
def test_warmup_shapes_are_the_cheapest_first_within_the_bounds() -> None:
    from anglekit.serve.batcher import WARMUP_BATCH, warmup_shapes

    shapes = warmup_shapes(64, 16384, 40, 8)
    assert {w for _, w in shapes} == {8, 16, 24, 32, 40} and max(b for b, _ in shapes) == WARMUP_BATCH
    assert len(shapes) == len(set(shapes)) == WARMUP_BATCH * 5
    tokens = [b * w for b, w in shapes]
    assert tokens == sorted(tokens) and shapes[:3] == [(1, 8), (1, 16), (2, 8)]
    assert all(b <= 3 for b, _ in warmup_shapes(3, 16384, 40, 8))
    assert all(b * w <= 50 for b, w in warmup_shapes(64, 50, 40, 8)) and warmup_shapes(64, 50, 40, 8)
    assert warmup_shapes(4, 100, 5, 8) == [(1, 8), (2, 8), (3, 8), (4, 8)]  # a max width under the multiple: one width


class _Shapes:
    """A backend that records the shapes it was asked for and pads like OpenVINO (``multiple``)."""

    def __init__(self, inner: Any, multiple: int, cost: float = 0.0) -> None:
        self.inner, self.pad_multiple, self.cost = inner, multiple, cost
        self.dim, self.max_length, self.normalize = inner.dim, inner.max_length, inner.normalize
        self.shapes: list[tuple[int, int]] = []

    def tokenize(self, texts: Sequence[str], role: Any, *, truncate: bool) -> list[list[int]]:
        return self.inner.tokenize(texts, role, truncate=truncate)

    def embed(self, token_ids: Sequence[Sequence[int]]) -> np.ndarray:
        assert len({len(ids) for ids in token_ids}) == 1 or len(self.shapes) < 2, "warm-up rows of one batch have one width"
        self.shapes.append((len(token_ids), max(len(ids) for ids in token_ids)))
        if self.cost:
            threading.Event().wait(self.cost)
        return self.inner.embed(token_ids)


def test_warmup_runs_the_shapes_of_a_per_shape_runtime_within_its_time(tiny_backend: Callable[..., Any]) -> None:
    from anglekit.serve.batcher import warmup_shapes

    backend = _Shapes(tiny_backend(), 8)
    batcher = Batcher(backend, max_batch_tokens=16384, max_batch_size=4, max_queue=100)
    done = batcher.warmup(60.0)
    expected = warmup_shapes(4, 16384, backend.max_length, 8)
    assert done == len(expected) and backend.shapes[2:] == expected  # after the one-text and full-batch passes
    slow = _Shapes(tiny_backend(), 8, cost=0.05)
    done = Batcher(slow, max_batch_tokens=16384, max_batch_size=4, max_queue=100).warmup(0.2)
    assert 1 <= done <= 5 and len(slow.shapes) == 2 + done  # stops at its deadline


@pytest.mark.parametrize(("multiple", "seconds"), [(1, 60.0), (8, 0.0)])
def test_warmup_runs_two_passes_for_other_runtimes_or_without_time(tiny_backend: Callable[..., Any], multiple: int, seconds: float) -> None:
    backend = _Shapes(tiny_backend(), multiple)
    assert Batcher(backend, max_batch_tokens=16384, max_batch_size=4, max_queue=100).warmup(seconds) == 0
    assert len(backend.shapes) == 2
