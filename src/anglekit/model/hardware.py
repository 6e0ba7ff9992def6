"""What the CPU can do natively, read from its instruction-set flags (never guessed from its name).

One place for the question "does this CPU compute bf16 natively?" so that training (``--precision
auto``) and inference backends answer it the same way. Tests simulate a CPU by monkeypatching
:func:`cpu_flags` (or :func:`cpu_has_native_bf16`).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
"""Linux /proc/cpuinfo flags of instructions that compute bf16 dot products in hardware."""

CPUINFO = Path("/proc/cpuinfo")


@lru_cache(maxsize=1)
def _read_cpu_flags(path: str) -> frozenset[str]:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / ARM
            return frozenset(value.split())
    return frozenset()


def cpu_flags() -> frozenset[str]:
    """The CPU's instruction-set flags as Linux reports them (empty where there is no /proc/cpuinfo)."""
    return _read_cpu_flags(str(CPUINFO))


def cpu_has_native_bf16() -> bool:
    """True when the CPU has bf16 instructions (AVX512-BF16 or AMX-BF16).

    Without /proc/cpuinfo (macOS, Windows) torch's own view decides: its CPU capability must
    name AMX or AVX512_BF16. ``torch.ops.mkldnn._is_mkldnn_bf16_supported()`` alone is not enough:
    it is True on any AVX512 CPU, where bf16 is emulated and slower than fp32.
    """
    flags = cpu_flags()
    if flags:
        return bool(flags & NATIVE_BF16_FLAGS)
    import torch

    capability = str(torch.backends.cpu.get_cpu_capability()).upper()
    return "AMX" in capability or "BF16" in capability


def bf16_flags_present() -> list[str]:
    """The native-bf16 flags this CPU has, sorted (for logs and benchmark JSON)."""
    return sorted(cpu_flags() & NATIVE_BF16_FLAGS)
