"""Decoder LLMs as embedders: prompts, LoRA, bidirectional attention, k-bit loading, GGUF files.

Each concept lives in its own module; none imports torch, transformers or peft at import time
(``prompts`` is pure Python), so ``anglekit --help`` and configuration checks stay light.

- :mod:`anglekit.llm.prompts`: prompt presets, templates with ``{text}``, the paper's preprocessing.
- :mod:`anglekit.llm.lora`: LoRA settings, attaching / loading / merging adapters (PEFT).
- :mod:`anglekit.llm.bidirectional`: drop the causal mask of a decoder backbone (BiLLM).
- :mod:`anglekit.llm.quantization`: 4/8-bit loading (bitsandbytes, CUDA only).
- :mod:`anglekit.llm.gguf`: recognise and load GGUF checkpoints.
- :mod:`anglekit.llm.attention`: choose and set the attention kernel (eager, SDPA, FlashAttention-2, torch_varlen), unpadding guard.
- :mod:`anglekit.llm.varlen`: unpadded attention on torch's own variable-length FlashAttention kernel (CUDA).
"""
