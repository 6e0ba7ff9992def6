"""Ray Data adapter (a real local Ray: ``ray.init(num_cpus=2)``) and the Spark predict function:
both give Embedder.encode's vectors."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from anglekit.errors import DataError

TEXTS = ["a man is playing the guitar .", "dog", "two kids ride bikes", "the old woman walks her dog .", "rain today", "red car"]


def test_spark_predict_fn_equals_encode(tiny_bert_dir: Path) -> None:
    import pickle

    from anglekit.model.embedder import Embedder
    from anglekit.scale.spark import predict_fn_factory

    factory = pickle.loads(
        pickle.dumps(predict_fn_factory(str(tiny_bert_dir), device="cpu", normalize=True, role="document", prompts={"document": "passage: "}))
    )
    predict = factory()  # what Spark calls once per Python worker
    out = predict(np.array(TEXTS, dtype=object))
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu", prompts={"document": "passage: "}).encode(TEXTS, normalize=True, role="document")
    assert out.dtype == np.float32 and out.shape == (len(TEXTS), 32)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=0)
    assert predict(np.array([], dtype=object)).shape == (0, 32)  # an empty batch: no rows, no error


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (np.array(["dog", None], dtype=object), "text 2 of a batch of 2 (after 'dog') is null: drop them first, e.g. df.where(F.col('text').isNotNull()"),
        (np.array(["dog", float("nan")], dtype=object), "text 2 of a batch of 2 (after 'dog') is null"),  # a null under pandas 3
        (np.array([" \u200b "], dtype=object), "text 1 of a batch of 1 is blank"),
        (np.array([7, 8], dtype=np.int32), "text 1 of a batch of 2 is not a string but int 7: embed a string column"),
        (np.array([b"dog"], dtype=object), "is not a string but bytes b'dog'"),
        (np.array([["a", "b"]], dtype=object), "expected one column of strings, got a batch of shape (1, 2)"),
    ],
)
def test_spark_batch_checks(batch: np.ndarray, message: str) -> None:
    from anglekit.scale.spark import check_batch

    with pytest.raises(DataError, match=re.escape(message)):
        check_batch(batch)


def test_spark_factory_settings(tiny_bert_dir: Path) -> None:
    from anglekit.errors import ConfigError
    from anglekit.scale.spark import predict_fn_factory

    for bad, match in [({"batch_size": 0}, "batch_size must be a positive integer"), ({"batch_size": True}, "batch_size"),
                       ({"normalize": "yes"}, "normalize must be"), ({"role": " "}, "role must be")]:  # fmt: skip
        with pytest.raises(ConfigError, match=match):
            predict_fn_factory(str(tiny_bert_dir), **bad)
    with pytest.raises(ConfigError, match="role 'document': the model has no prompt of that name; its prompts: none"):
        predict_fn_factory(str(tiny_bert_dir), device="cpu", role="document")()  # when the worker loads it, before any batch


def test_ray_embedder_on_a_batch_without_ray(tiny_bert_dir: Path) -> None:
    """The class is plain Python: a numpy batch and a pandas batch, as Ray hands them over."""
    import pandas as pd

    from anglekit.model.embedder import Embedder
    from anglekit.scale.ray import RayEmbedder

    embedder = RayEmbedder(str(tiny_bert_dir), device="cpu", batch_size=2)
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(TEXTS)
    out = embedder({"id": np.arange(len(TEXTS)), "text": np.array(TEXTS, dtype=object)})
    np.testing.assert_allclose(out["embedding"], expected, atol=1e-5, rtol=0)
    frame = embedder(pd.DataFrame({"text": TEXTS}))
    np.testing.assert_allclose(np.stack(frame["embedding"].to_list()), expected, atol=1e-5, rtol=0)
    with pytest.raises(DataError, match="no column 'text'"):
        embedder({"body": np.array(TEXTS, dtype=object)})
    with pytest.raises(DataError, match="row 3"):
        embedder({"text": np.array(["a", "b", ""], dtype=object)})


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install 'anglekit[scale]')")
def test_ray_data_map_batches_on_a_local_cluster(tiny_bert_dir: Path) -> None:
    import shutil
    import tempfile

    import ray

    from anglekit.model.embedder import Embedder
    from anglekit.scale.ray import embed_dataset

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             _temp_dir=(scratch := tempfile.mkdtemp(prefix="ray-", dir="/tmp")), runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}})  # fmt: skip
    try:
        ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(TEXTS * 5)])
        rows = embed_dataset(ds, str(tiny_bert_dir), concurrency=2, batch_size=4, normalize=True).take_all()
        assert ray.cluster_resources().get("CPU") == 2
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)  # a short path: Ray's sockets live under it
    rows.sort(key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(30))
    got = np.stack([r["embedding"] for r in rows])
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode([r["text"] for r in rows], normalize=True)
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
