"""Datasheet peaks of current NVIDIA GPUs, keyed by the name the driver reports.

The roofline's fallback ceilings when ``ktui calibrate`` has not measured the device, and the
hard limits behind the "impossible" flag (nothing runs faster than the datasheet peak).

Every rate is **dense** (NVIDIA quotes tensor-core rates "with sparsity", twice the dense rate;
those are halved here). Per dtype, the fastest unit that can compute it: ``fp64`` is the FP64
tensor-core rate where there is one, ``fp32`` the CUDA-core rate, ``tf32/fp16/bf16/fp8`` tensor
cores (for GeForce cards the FP16-accumulate rate where it is higher). A ceiling that is too high
only makes a fraction of roofline look smaller; one that is too low would call real kernels
impossible, so where a source was ambiguous the higher figure is used and the comment says so.

Memory bandwidth is the datasheet's peak in GB/s (10^9 bytes/s). L2 sizes come from the
architecture whitepapers (datasheets rarely give them); ``None`` where no NVIDIA document states
it — the timer reads the L2 size from the device itself and only falls back on this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class DeviceSpec:
    name: str  # canonical product name
    bandwidth_gbs: float
    tflops: dict[str, float]  # dense TFLOP/s per dtype key (see DTYPES)
    l2_mb: float | None
    source: str  # the vendor document the figures come from
    requires: tuple[str, ...]  # tokens the reported name must contain (see ``lookup``)
    excludes: tuple[str, ...] = field(default=())


def _rates(fp64: float, fp32: float, tf32: float, fp16: float, bf16: float, fp8: float | None) -> dict[str, float]:
    rates = {"fp64": fp64, "fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16}
    if fp8 is not None:
        rates["fp8"] = fp8
    return rates


# Order matters: the first entry whose tokens all appear in the name wins, so specific variants
# (NVL, PCIe, 80GB) come before the generic name of their family.
TABLE: tuple[DeviceSpec, ...] = (
    # NVIDIA H200 Tensor Core GPU datasheet (2024): H200 SXM 34/67 FP64 (vector/tensor), FP32 67,
    # TF32 989*, BF16/FP16 1,979*, FP8 3,958* (* with sparsity), 141 GB HBM3e at 4.8 TB/s.
    # H200 NVL: FP64 30/60, FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*, 4.8 TB/s.
    # L2 50 MB: same GH100 die as H100 (NVIDIA H100 Tensor Core GPU Architecture whitepaper).
    DeviceSpec("NVIDIA H200 NVL", 4800, _rates(60, 60, 417.5, 835.5, 835.5, 1670.5), 50,
               "NVIDIA H200 datasheet (H200 NVL column)", ("h200", "nvl")),
    DeviceSpec("NVIDIA H200 SXM 141GB", 4800, _rates(67, 67, 494.5, 989.5, 989.5, 1979), 50,
               "NVIDIA H200 datasheet (H200 SXM column)", ("h200",)),
    # NVIDIA H100 Tensor Core GPU datasheet: H100 SXM FP64 34/67, FP32 67, TF32 989*, BF16/FP16
    # 1,979*, FP8 3,958*, 3.35 TB/s; H100 PCIe FP64 26/51, FP32 51, TF32 756*, BF16/FP16 1,513*,
    # FP8 3,026*, 2 TB/s; H100 NVL FP64 30/60, FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 3,341*,
    # 3.9 TB/s. L2 50 MB (Hopper architecture whitepaper).
    DeviceSpec("NVIDIA H100 NVL", 3900, _rates(60, 60, 417.5, 835.5, 835.5, 1670.5), 50,
               "NVIDIA H100 datasheet (H100 NVL column)", ("h100", "nvl")),
    DeviceSpec("NVIDIA H100 PCIe", 2000, _rates(51, 51, 378, 756.5, 756.5, 1513), 50,
               "NVIDIA H100 datasheet (H100 PCIe column)", ("h100", "pcie")),
    DeviceSpec("NVIDIA H100 SXM 80GB", 3350, _rates(67, 67, 494.5, 989.5, 989.5, 1979), 50,
               "NVIDIA H100 datasheet (H100 SXM column)", ("h100",)),
    # NVIDIA A100 Tensor Core GPU datasheet: FP64 9.7, FP64 tensor 19.5, FP32 19.5, TF32 156
    # (312*), BF16/FP16 312 (624*), no FP8. Bandwidth: 40GB PCIe 1,555 GB/s, 80GB PCIe 1,935,
    # 40GB SXM 1,555, 80GB SXM 2,039. L2 40 MB (NVIDIA A100 Tensor Core GPU Architecture whitepaper).
    DeviceSpec("NVIDIA A100 80GB PCIe", 1935, _rates(19.5, 19.5, 156, 312, 312, None), 40,
               "NVIDIA A100 datasheet (A100 80GB PCIe column)", ("a100", "pcie", "80gb")),
    DeviceSpec("NVIDIA A100 40GB PCIe", 1555, _rates(19.5, 19.5, 156, 312, 312, None), 40,
               "NVIDIA A100 datasheet (A100 40GB PCIe column)", ("a100", "pcie")),
    DeviceSpec("NVIDIA A100 80GB SXM", 2039, _rates(19.5, 19.5, 156, 312, 312, None), 40,
               "NVIDIA A100 datasheet (A100 80GB SXM column)", ("a100", "80gb")),
    DeviceSpec("NVIDIA A100 40GB SXM", 1555, _rates(19.5, 19.5, 156, 312, 312, None), 40,
               "NVIDIA A100 datasheet (A100 40GB SXM column)", ("a100",)),
    # NVIDIA HGX B200 datasheet (8 GPUs: FP64/FP64 tensor 296 TF, FP32 600 TF, TF32 18 PF*,
    # FP16/BF16 36 PF*, FP8 72 PF*, 64 TB/s HBM3e) divided by 8. No L2 size in NVIDIA's documents.
    DeviceSpec("NVIDIA B200", 8000, _rates(37, 75, 1125, 2250, 2250, 4500), None,
               "NVIDIA HGX B200 datasheet (8-GPU figures / 8)", ("b200",)),
    # NVIDIA L40S datasheet: FP32 91.6, TF32 183 (366*), BF16/FP16 362.05 (733*), FP8 733
    # (1,466*), 864 GB/s GDDR6. FP64 is not in the datasheet: 1/64 of FP32 (Ada whitepaper).
    DeviceSpec("NVIDIA L40S", 864, _rates(1.43, 91.6, 183, 362.05, 362.05, 733), None,
               "NVIDIA L40S datasheet", ("l40s",)),
    # NVIDIA Ada GPU Architecture whitepaper, appendix (GeForce RTX 4090): FP32 82.6, TF32 82.6,
    # FP16 tensor 330.3 with FP16 accumulate (165.2 with FP32), BF16 165.2 (FP32 accumulate only),
    # FP8 660.6 with FP16 accumulate, FP64 1/64 of FP32; 1,008 GB/s GDDR6X; L2 72 MB.
    DeviceSpec("NVIDIA GeForce RTX 4090", 1008, _rates(1.29, 82.6, 82.6, 330.3, 165.2, 660.6), 72,
               "NVIDIA Ada GPU Architecture whitepaper (RTX 4090)", ("4090",), ("laptop", "mobile", "d")),
    # NVIDIA RTX Blackwell GPU Architecture whitepaper / GeForce RTX 5090 specifications: FP32
    # 104.8, FP16 tensor 838* with FP16 accumulate, FP8 1,676*, 1,792 GB/s GDDR7, L2 96 MB.
    # BF16 (FP32 accumulate) may be half the FP16 rate on GeForce; the higher figure is kept
    # because a ceiling must never be below the truth. FP64 1/64 of FP32.
    DeviceSpec("NVIDIA GeForce RTX 5090", 1792, _rates(1.64, 104.8, 209.5, 419, 419, 838), 96,
               "NVIDIA RTX Blackwell whitepaper (RTX 5090)", ("5090",), ("laptop", "mobile", "d")),
)

_NOISE_WORDS = {"nvidia", "geforce", "tesla", "rtx"}


def tokens(device_name: str) -> set[str]:
    """``"NVIDIA A100-SXM4-80GB"`` → ``{"a100", "sxm4", "80gb"}``."""
    words = re.split(r"[\s\-_/()]+", device_name.lower())
    return {w for w in words if w and w not in _NOISE_WORDS}


def lookup(device_name: str) -> DeviceSpec | None:
    """The datasheet entry for a reported device name, or None for a device not in the table.

    Matches on tokens, not on the exact string, because the same product reports itself in
    several spellings ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe").
    A variant with other peaks (a laptop part, the RTX 4090 D) is excluded rather than guessed.
    """
    found = tokens(device_name)
    for spec in TABLE:
        if all(t in found for t in spec.requires) and not any(t in found for t in spec.excludes):
            return spec
    return None
