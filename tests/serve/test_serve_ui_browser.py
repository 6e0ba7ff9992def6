"""The page of ``anglekit serve`` in a real browser: headless Chromium (Debian's package) driven by
selenium through the system's chromedriver (never Selenium Manager: nothing is downloaded).

It types sentences and checks the similarity matrix against the model's own cosine (float and
binary vectors), searches each served index and checks the hits against a brute-force search, and
checks that a server error (an over-long input, an empty query) is shown on the page. Slow (starting
Chromium takes most of half a minute on a busy 2-core machine): ``pytest -m slow``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serving import Running, sentences, start_server

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = "/usr/bin/chromedriver"
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install 'anglekit[test]')")
if CHROMIUM is None or not os.access(CHROMEDRIVER, os.X_OK):
    pytest.skip("Chromium and its driver are not installed (apt-get install chromium chromium-driver)", allow_module_level=True)

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

DOCS = sentences(15, seed=11)
SENTENCES = ["a man is playing a guitar", "someone plays an instrument", "the market fell sharply today", "two dogs run in a park"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never downloads a driver or a browser
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def reference(tiny_bert_dir: Path) -> Any:
    """The served model on its own; mean pooling, whose cosines on the random tiny BERT spread (CLS's are all near 1)."""
    from anglekit.model.embedder import Embedder

    return Embedder.from_pretrained(tiny_bert_dir, device="cpu", pooling="last_avg")


@pytest.fixture(scope="module")
def page_server(tiny_backend: Callable[..., Any], reference: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    from anglekit.index.store import VectorIndex

    root = tmp_path_factory.mktemp("page-indexes")
    ids = [f"d{i}" for i in range(len(DOCS))]
    VectorIndex.build(reference, ids, DOCS, name=str(reference.source)).save(root / "docs")
    VectorIndex.build(reference, ids[:6], DOCS[:6], name=str(reference.source)).save(root / "few")
    # --no-auto-truncate: an over-long input is a 400 the page has to show.
    with start_server(lambda: tiny_backend(pooling="last_avg"), index=(f"docs={root / 'docs'}", f"few={root / 'few'}"), auto_truncate=False) as running:
        assert running.state.status == "ready", running.state.error
        yield running


def wait(driver: Any, condition: Callable[[Any], Any], what: str, timeout: float = 60) -> Any:
    return WebDriverWait(driver, timeout).until(condition, message=f"the page never showed {what}")


def matrix_of(driver: Any) -> np.ndarray:
    cells = driver.find_elements(By.CSS_SELECTOR, "#matrix td")
    n = int(round(len(cells) ** 0.5))
    assert n * n == len(cells) and n > 0
    values = np.zeros((n, n))
    for cell in cells:
        value = float(cell.get_attribute("data-value"))
        assert cell.text == f"{value:.3f}"
        values[int(cell.get_attribute("data-row")), int(cell.get_attribute("data-col"))] = value
    return values


def cosines(vectors: np.ndarray) -> np.ndarray:
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def compare(driver: Any, texts: str, encoding: str = "float") -> None:
    box = driver.find_element(By.ID, "sentences")
    box.clear()
    if len(texts) > 200:  # typing key by key is slow; a long text is put in as a paste would
        driver.execute_script("arguments[0].value = arguments[1]", box, texts)
    else:
        box.send_keys(texts)
    Select(driver.find_element(By.ID, "encoding-format")).select_by_value(encoding)
    driver.find_element(By.ID, "compare").click()


@pytest.fixture(scope="module")
def page(browser: Any, page_server: Running) -> Any:
    browser.get(page_server.url + "/")
    wait(browser, lambda d: d.find_element(By.ID, "compare").is_enabled(), "the Compare button enabled")
    assert "model tiny" in browser.find_element(By.ID, "model-line").text
    return browser


def test_the_matrix_is_the_models_own_cosine(page: Any, reference: Any) -> None:
    compare(page, "\n".join(SENTENCES) + "\n\n")  # a blank line is no sentence
    wait(page, lambda d: d.find_element(By.ID, "matrix").is_displayed() and len(d.find_elements(By.CSS_SELECTOR, "#matrix td")) == 16, "the matrix")
    expected = cosines(reference.encode(SENTENCES))
    assert expected.min() < 0.95  # values that tell sentences apart
    np.testing.assert_allclose(matrix_of(page), expected, atol=1e-5)
    legend = [li.text for li in page.find_elements(By.CSS_SELECTOR, "#matrix-legend li")]
    assert legend == SENTENCES
    assert page.find_element(By.ID, "compare-error").is_displayed() is False


def test_the_matrix_of_binary_codes_is_the_cosine_of_their_signs(page: Any, reference: Any) -> None:
    texts = SENTENCES[:3]
    compare(page, "\n".join(texts), "binary")
    wait(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#matrix td")) == 9 and "binary" in d.find_element(By.ID, "compare-note").text,
         "the binary matrix")  # fmt: skip
    signs = np.where(reference.encode(texts) > 0, 1.0, -1.0)
    np.testing.assert_allclose(matrix_of(page), cosines(signs), atol=1e-9)
    assert not np.allclose(matrix_of(page), cosines(reference.encode(texts)), atol=1e-3)  # the codes, not the floats


def test_each_served_index_has_a_search_box_whose_hits_are_the_brute_force_ones(page: Any, reference: Any) -> None:
    forms = page.find_elements(By.CSS_SELECTOR, "form.index")
    assert [f.get_attribute("data-index") for f in forms] == ["docs", "few"]
    query = "a man plays the guitar"
    q = reference.encode_query([query])
    for form, (name, docs) in zip(forms, (("docs", DOCS), ("few", DOCS[:6])), strict=False):
        assert form.find_element(By.CSS_SELECTOR, ".k").get_attribute("max") == str(len(docs))
        box = form.find_element(By.CSS_SELECTOR, ".query")
        box.clear()
        box.send_keys(query)
        k = form.find_element(By.CSS_SELECTOR, ".k")
        k.clear()
        k.send_keys("4")
        form.find_element(By.CSS_SELECTOR, ".search").click()
        wait(page, lambda d, form=form: len(form.find_elements(By.CSS_SELECTOR, ".hits li")) == 4, f"the hits of {name}")
        hits = form.find_elements(By.CSS_SELECTOR, ".hits li")
        scores = (cosines(np.vstack([q, reference.encode_document(docs)]))[0, 1:]).astype(np.float64)
        best = np.argsort(-scores, kind="stable")[:4]
        assert [h.get_attribute("data-id") for h in hits] == [f"d{i}" for i in best]
        np.testing.assert_allclose([float(h.get_attribute("data-score")) for h in hits], scores[best], atol=1e-5)
        assert [h.find_element(By.CSS_SELECTOR, ".text").text for h in hits] == [docs[i] for i in best]


def test_a_server_error_is_shown_on_the_page(page: Any, reference: Any) -> None:
    compare(page, "\n".join(SENTENCES[:2]))
    wait(page, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#matrix td")) == 4, "the matrix")
    compare(page, "short\n" + " ".join(["guitar"] * 400))
    error = wait(page, lambda d: d.find_element(By.ID, "compare-error") if d.find_element(By.ID, "compare-error").is_displayed() else None, "the error")
    assert error.text.startswith("Error 400: input[1] has ")
    assert f"more than the model's maximum of {reference.config.max_length} (the server runs with --no-auto-truncate)" in error.text
    assert not page.find_element(By.ID, "matrix").is_displayed()  # no stale matrix beside the error
    assert page.find_elements(By.CSS_SELECTOR, "#matrix-legend li") == [] and page.find_element(By.ID, "compare-note").text == ""
    compare(page, "\n".join(SENTENCES[:2]))  # and the next good request clears it
    wait(page, lambda d: not d.find_element(By.ID, "compare-error").is_displayed() and d.find_element(By.ID, "matrix").is_displayed(), "the error cleared")

    form = page.find_elements(By.CSS_SELECTOR, "form.index")[0]
    form.find_element(By.CSS_SELECTOR, ".query").clear()
    form.find_element(By.CSS_SELECTOR, ".search").click()
    shown = form.find_element(By.CSS_SELECTOR, ".error")
    wait(page, lambda d: shown.is_displayed(), "the search error")
    assert shown.text == "Error 400: query is an empty string"
    assert form.find_elements(By.CSS_SELECTOR, ".hits li") == []


def test_the_page_says_when_the_server_is_gone(browser: Any, tiny_backend: Callable[..., Any]) -> None:
    with start_server(lambda: tiny_backend()) as running:
        browser.get(running.url + "/")
        wait(browser, lambda d: d.find_element(By.ID, "compare").is_enabled(), "the Compare button enabled")
        assert browser.find_element(By.ID, "no-index").is_displayed()
    compare(browser, "one sentence\nanother one")
    error = wait(browser, lambda d: d.find_element(By.ID, "compare-error") if d.find_element(By.ID, "compare-error").is_displayed() else None, "the error")
    assert error.text.startswith("the server did not answer")


def test_a_missing_key_is_shown_and_the_key_box_opens(browser: Any, tiny_backend: Callable[..., Any]) -> None:
    with start_server(lambda: tiny_backend(), api_key="s3cret") as running:
        browser.get(running.url + "/")
        shown = wait(browser, lambda d: d.find_element(By.ID, "info-error") if d.find_element(By.ID, "info-error").is_displayed() else None, "the error")
        assert shown.text == "Error 401: missing API key: send the header 'Authorization: Bearer KEY'"
        assert browser.find_element(By.ID, "key-box").get_attribute("open") is not None
        browser.find_element(By.ID, "api-key").send_keys("s3cret")
        browser.find_element(By.ID, "reconnect").click()
        wait(browser, lambda d: d.find_element(By.ID, "compare").is_enabled(), "the Compare button enabled")
        assert not browser.find_element(By.ID, "info-error").is_displayed()
