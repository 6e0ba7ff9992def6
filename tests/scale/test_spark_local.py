"""docs/scale.md's Spark recipe, run as written on a real local Spark (``local[2]``, 127.0.0.1 only),
against ``anglekit encode``; and what the adapter does with bad columns inside Spark.

Needs pyspark (``pip install 'anglekit[spark]'``) and Java 17 (``scripts/setup.sh all`` installs
Debian's openjdk-17-jre-headless as root); skipped, with the reason, without them.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import helpers

ROOT = Path(__file__).resolve().parents[2]
SCALE_DOC = ROOT / "docs" / "scale.md"
STSB_TEST = ROOT.parent / "shared" / "data" / "stsb" / "sts-test.csv"
SENTENCES = 300
DOC_PATHS = {"model": "runs/quickstart/model", "corpus": "corpus.parquet", "output": "embeddings.parquet"}
"""The literal paths of the doc's block that the test replaces (each must occur once)."""


def java_problem() -> str | None:
    """Why this machine cannot start Spark's JVM (None: it can): no java, or one older than this
    pyspark needs (17 for Spark 4, 8 before)."""
    from importlib.metadata import version

    needed = 17 if int(version("pyspark").split(".")[0]) >= 4 else 8
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None or not Path(java).is_file():
        where = f"JAVA_HOME={home} holds no bin/java" if home else "no java on PATH"
        return f"{where} (Spark needs Java {needed}+: apt-get install openjdk-17-jre-headless, or scripts/setup.sh all as root)"
    banner = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    found = re.search(r'version "(?:1\.)?(\d+)', banner)
    if found is None or int(found.group(1)) < needed:
        return f"pyspark {version('pyspark')} needs Java {needed}+; {java} is {banner.splitlines()[0] if banner else 'unknown'}"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning"),  # pyspark 4.3 on pandas 3; it works
    pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="pyspark is not installed (pip install 'anglekit[spark]')"),
]


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Spark bound to 127.0.0.1, with small memory, whose Python workers import this
    checkout's anglekit; stopped after the module's tests."""
    if (problem := java_problem()) is not None:
        pytest.skip(problem)
    import anglekit

    scratch = tmp_path_factory.mktemp("spark")
    src = str(Path(anglekit.__file__).resolve().parents[1])
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setenv("PYTHONPATH", os.pathsep.join([src, *filter(None, [os.environ.get("PYTHONPATH")])]))
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]").appName("anglekit-test")
            .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.memory", "512m").config("spark.executor.memory", "512m")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2").config("spark.local.dir", str(scratch / "local"))
            .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
            .getOrCreate()
        )  # fmt: skip
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            stop(session)


def stop(session: Any) -> None:
    """Stop the session, then its JVM (it exits when its stdin closes), so no Spark outlives the module."""
    from pyspark import SparkContext

    session.stop()
    gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
    if gateway is not None:
        gateway.shutdown()
        if (proc := getattr(gateway, "proc", None)) is not None:
            proc.stdin.close()
            proc.wait(timeout=60)


def spark_block() -> str:
    """The python block of docs/scale.md's Spark section, as the page shows it."""
    text = SCALE_DOC.read_text(encoding="utf-8")
    section = text[text.index("### Spark (`predict_batch_udf`)") :]
    found = re.search(r"^```python\n(.*?)^```$", section, flags=re.S | re.M)
    assert found is not None, "docs/scale.md: the Spark section has no python block"
    return found.group(1)


def stsb_sentences(n: int) -> list[str]:
    """The first ``n`` sentences of STS-B test (both sides of each pair, in file order)."""
    out: list[str] = []
    with STSB_TEST.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            out.extend(row[5:7])
            if len(out) >= n:
                return out[:n]
    raise AssertionError(f"{STSB_TEST}: fewer than {n} sentences")


def test_the_docs_spark_recipe_gives_anglekit_encodes_vectors(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from anglekit.errors import ConfigError
    from anglekit.model.offline import minilm_dir

    try:
        model = str(minilm_dir())
    except ConfigError as exc:
        pytest.skip(f"all-MiniLM-L6-v2 package not installed: {exc}")
    texts = stsb_sentences(SENTENCES)
    corpus, output = tmp_path / "corpus.parquet", tmp_path / "embeddings.parquet"
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), corpus)
    code = spark_block()
    for key, literal in DOC_PATHS.items():
        assert code.count(f'"{literal}"') == 1, f"docs/scale.md's Spark block no longer names {literal!r} once: update DOC_PATHS"
        code = code.replace(f'"{literal}"', repr(str({"model": model, "corpus": corpus, "output": output}[key])))
    exec(compile(code, f"{SCALE_DOC}:spark", "exec"), {"spark": spark})  # the page's block, as written

    table = pq.read_table(output).sort_by("id")
    assert table.column("id").to_pylist() == list(range(len(texts)))
    assert table.column("text").to_pylist() == texts
    got = np.asarray(table.column("embedding").to_pylist(), dtype=np.float32)
    status, _, err = helpers.run_cli(["encode", model, "--input", str(corpus), "--column", "text", "--output", str(tmp_path / "ref.npy"), "--normalize", "--quiet"], capsys)  # fmt: skip
    assert status == 0, err
    expected = np.load(tmp_path / "ref.npy")
    assert got.shape == expected.shape == (SENTENCES, 384)
    assert (worst := float(np.abs(got - expected).max())) <= 1e-5, f"Spark's vectors differ from anglekit encode's by up to {worst:.3g}"
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    assert helpers.row_cosines(got, expected).min() > 1 - 1e-6


def failure_of(frame: Any) -> str:
    """The message of the Python worker's error that fails ``frame``'s job (it must fail so)."""
    from pyspark.errors import PythonException

    with pytest.raises(PythonException) as caught:
        frame.collect()
    return str(caught.value)


def test_bad_columns_and_empty_partitions_inside_spark(spark: Any, tiny_bert_dir: Path) -> None:
    from pyspark.ml.functions import predict_batch_udf
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, FloatType

    from anglekit.model.embedder import Embedder
    from anglekit.scale.spark import predict_fn_factory

    embed = predict_batch_udf(predict_fn_factory(str(tiny_bert_dir), device="cpu"), return_type=ArrayType(FloatType()), batch_size=4)
    texts = ["a man is playing the guitar .", "dog", "two kids ride bikes", "rain today", "red car"]
    expected = Embedder.from_pretrained(tiny_bert_dir, device="cpu").encode(texts)

    # More partitions than rows, so some are empty (spark.range spreads 5 ids over 6 partitions,
    # without a shuffle): every row still gets its vector, and an empty DataFrame gives no rows.
    sparse = spark.range(0, len(texts), numPartitions=6).withColumn("text", F.element_at(F.array(*map(F.lit, texts)), F.col("id").cast("int") + 1))
    rows = sorted(sparse.withColumn("embedding", embed("text")).collect(), key=lambda r: r.id)
    assert [r.text for r in rows] == texts
    np.testing.assert_allclose(np.asarray([r.embedding for r in rows]), expected, atol=1e-5, rtol=0)
    assert spark.createDataFrame([], "id int, text string").withColumn("embedding", embed("text")).collect() == []

    # A null (NaN under pandas 3) fails the job naming it; the filter the message suggests then works.
    frame = spark.createDataFrame([(0, "dog"), (1, None), (2, "  ")], "id int, text string").coalesce(1)
    message = failure_of(frame.withColumn("embedding", embed("text")))
    assert "DataError" in message and "text 2 of a batch of 3 (after 'dog') is null" in message and "isNotNull()" in message
    kept = frame.where(F.col("text").isNotNull() & (F.trim("text") != "")).withColumn("embedding", embed("text")).collect()
    assert [r.id for r in kept] == [0]
    numbers = spark.createDataFrame([(0, 7)], "id int, text int").withColumn("embedding", embed("text"))
    assert "text 1 of a batch of 1 is not a string but int 7: embed a string column" in failure_of(numbers)
