// The page of `anglekit serve` (GET /): compare sentences and search the served indexes through the
// server's own routes (GET v1/info, POST v1/embeddings, POST v1/search). No build step, no
// dependency: it runs as shipped, offline.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  let info = null;

  class ServerError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function headers() {
    const h = { "Content-Type": "application/json" };
    const key = $("api-key").value.trim();
    if (key) h.Authorization = `Bearer ${key}`;
    return h;
  }

  // The JSON body of a route, else a ServerError with the server's own message (its error object).
  async function call(method, path, body) {
    let response;
    try {
      response = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      throw new ServerError(0, `the server did not answer: ${err.message}`);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const message = data && data.error && data.error.message ? data.error.message : text || response.statusText;
      throw new ServerError(response.status, message);
    }
    return data;
  }

  function showError(element, err) {
    element.textContent = err.status ? `Error ${err.status}: ${err.message}` : err.message;
    element.hidden = false;
  }

  function clearError(element) {
    element.textContent = "";
    element.hidden = true;
  }

  // --- the server's description --------------------------------------------------------------

  async function connect(attempt = 0) {
    const line = $("model-line");
    clearError($("info-error"));
    try {
      info = await call("GET", "v1/info");
    } catch (err) {
      if (err.status === 503 && attempt < 600) {
        line.textContent = `waiting for the model: ${err.message}`;
        setTimeout(() => connect(attempt + 1), 1000);
        return;
      }
      line.textContent = "not connected";
      if (err.status === 401) $("key-box").open = true;
      showError($("info-error"), err);
      return;
    }
    const parts = [`model ${info.model}`, `${info.dimensions} dimensions`, `up to ${info.max_input_tokens} tokens an input`];
    if (info.layers) parts.push(`${info.layers} layers (early exit)`);
    line.textContent = parts.join(" · ");
    setUpCompare();
    setUpIndexes();
  }

  // --- compare ---------------------------------------------------------------------------------

  function setUpCompare() {
    const formats = $("encoding-format");
    formats.replaceChildren(...info.encoding_formats.map((name) => new Option(name, name)));
    $("dimensions").max = info.dimensions;
    $("dimensions").placeholder = `all ${info.dimensions}`;
    const layers = $("layer");
    if (info.layers) {
      const options = [new Option(`all ${info.layers} (full model)`, "")];
      for (let layer = 1; layer < info.layers; layer++) options.push(new Option(String(layer), String(layer)));
      layers.replaceChildren(...options);
      $("layer-label").hidden = false;
    }
    $("compare").disabled = false;
  }

  // The float vector of one response item, whatever its encoding (as anglekit.serve.quantized.decode).
  function vectorOf(item, format, quantization) {
    const e = item.embedding;
    if (format === "base64") {
      const binary = atob(e);
      const view = new DataView(new ArrayBuffer(binary.length));
      for (let i = 0; i < binary.length; i++) view.setUint8(i, binary.charCodeAt(i));
      return Float64Array.from({ length: binary.length / 4 }, (_, i) => view.getFloat32(4 * i, true));
    }
    if (!quantization) return Float64Array.from(e);
    if (format === "binary" || format === "ubinary") {
      const offset = quantization.offset || 0;
      return Float64Array.from({ length: quantization.dimensions }, (_, i) => ((((e[i >> 3] - offset) & 255) >> (7 - (i & 7))) & 1 ? 1 : -1));
    }
    return Float64Array.from(e, (code) => (code - quantization.zero_point) * quantization.scale);
  }

  function cosine(a, b) {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) {
      dot += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    return dot / (Math.max(Math.sqrt(na), 1e-12) * Math.max(Math.sqrt(nb), 1e-12));
  }

  function cell(tag, text) {
    const element = document.createElement(tag);
    element.textContent = text;
    return element;
  }

  function renderMatrix(sentences, vectors) {
    const table = $("matrix");
    const head = document.createElement("tr");
    head.append(cell("th", ""));
    sentences.forEach((sentence, j) => {
      const th = cell("th", `S${j + 1}`);
      th.title = sentence;
      th.scope = "col";
      head.append(th);
    });
    const rows = [head];
    sentences.forEach((sentence, i) => {
      const row = document.createElement("tr");
      const th = cell("th", `S${i + 1}`);
      th.title = sentence;
      th.scope = "row";
      row.append(th);
      vectors.forEach((other, j) => {
        const value = cosine(vectors[i], other);
        const td = cell("td", value.toFixed(3));
        td.dataset.value = String(value);
        td.dataset.row = String(i);
        td.dataset.col = String(j);
        const strength = Math.max(0, Math.min(1, value));
        td.style.backgroundColor = `rgba(47, 111, 222, ${(0.08 + 0.5 * strength).toFixed(3)})`;
        row.append(td);
      });
      rows.push(row);
    });
    table.replaceChildren(...rows);
    table.hidden = false;
    $("matrix-legend").replaceChildren(...sentences.map((sentence) => cell("li", sentence)));
  }

  async function compare() {
    const error = $("compare-error");
    clearError(error);
    const sentences = $("sentences").value.split("\n").map((line) => line.trim()).filter((line) => line);
    if (!sentences.length) {
      showError(error, new ServerError(0, "type at least one sentence, one a line"));
      return;
    }
    const format = $("encoding-format").value || "float";
    const body = { input: sentences, encoding_format: format };
    const dimensions = $("dimensions").value.trim();
    if (dimensions) body.dimensions = Number(dimensions);
    const layer = $("layer").value;
    if (!$("layer-label").hidden && layer) body.layer = Number(layer);
    const button = $("compare");
    button.disabled = true;
    try {
      const response = await call("POST", "v1/embeddings", body);
      const vectors = response.data.map((item) => vectorOf(item, format, response.quantization));
      renderMatrix(sentences, vectors);
      const width = vectors.length ? vectors[0].length : 0;
      $("compare-note").textContent = `${sentences.length} sentences, ${response.usage.prompt_tokens} tokens, ${format} vectors of ${width} dimensions`;
    } catch (err) {
      $("matrix").hidden = true;
      $("matrix-legend").replaceChildren();
      $("compare-note").textContent = "";
      showError(error, err);
    } finally {
      button.disabled = false;
    }
  }

  // --- search ----------------------------------------------------------------------------------

  function setUpIndexes() {
    const holder = $("indexes");
    holder.replaceChildren();
    $("no-index").hidden = info.indexes.length > 0;
    for (const index of info.indexes) {
      const form = $("index-template").content.firstElementChild.cloneNode(true);
      form.dataset.index = index.name;
      form.querySelector(".index-name").textContent = index.name;
      form.querySelector(".index-about").textContent = `${index.documents} documents, ${index.kind} index, ${index.quantize === "none" ? "float" : index.quantize} vectors`;
      const k = form.querySelector(".k");
      k.max = index.max_k;
      k.value = String(Math.min(5, index.max_k));
      form.querySelector(".search").disabled = false;
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        search(form, index);
      });
      holder.append(form);
    }
  }

  async function search(form, index) {
    const error = form.querySelector(".error");
    const hits = form.querySelector(".hits");
    const note = form.querySelector(".note");
    clearError(error);
    const query = form.querySelector(".query").value;
    const body = { index: index.name, query };
    const k = form.querySelector(".k").value.trim();
    if (k) body.k = Number(k);
    const button = form.querySelector(".search");
    button.disabled = true;
    try {
      const response = await call("POST", "v1/search", body);
      const results = response.data[0].results;
      hits.replaceChildren(
        ...results.map((hit) => {
          const li = document.createElement("li");
          li.dataset.id = String(hit.id);
          li.dataset.score = String(hit.score);
          li.append(cell("span", hit.score.toFixed(4)), cell("span", String(hit.id)), cell("span", hit.text == null ? "" : hit.text));
          li.children[0].className = "score";
          li.children[1].className = "doc-id";
          li.children[2].className = "text";
          return li;
        }),
      );
      note.textContent = `${results.length} hits, ${response.usage.prompt_tokens} query tokens`;
    } catch (err) {
      hits.replaceChildren();
      note.textContent = "";
      showError(error, err);
    } finally {
      button.disabled = false;
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("compare").addEventListener("click", compare);
    $("reconnect").addEventListener("click", () => connect());
    connect();
  });
})();
