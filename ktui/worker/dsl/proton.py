"""What the installed Triton offers for intra-kernel sections (Proton scopes), asked where it runs."""

from __future__ import annotations

from typing import Any


def proton_support() -> dict[str, Any]:
    """``{"supported", "reason", "triton"}`` for the installed Triton (imports it: call in a child)."""
    try:
        import triton
    except ImportError:
        return {"supported": False, "reason": "Triton is not installed", "triton": ""}
    version = getattr(triton, "__version__", "?")
    try:
        import triton.profiler
        import triton.profiler.language as pl
    except ImportError as exc:
        return {"supported": False, "triton": version,
                "reason": f"Triton {version} has no Proton intra-kernel language (triton.profiler.language): {exc}"}
    missing = [name for name in ("scope", "enter_scope", "exit_scope") if not hasattr(pl, name)]
    if missing:
        return {"supported": False, "triton": version,
                "reason": f"Triton {version}'s triton.profiler.language lacks {', '.join(missing)}"}
    how = ("Triton kernels enabled with enable_semantic('triton')" if hasattr(pl, "enable_semantic")
           else "Triton kernels instrumented by default")
    return {"supported": True, "triton": version,
            "reason": f"Triton {version}: Proton intra-kernel scopes (instrumentation backend; {how})"}
