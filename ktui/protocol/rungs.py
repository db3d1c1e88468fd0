"""The rungs of the ladder as data: what every process may know of a rung without the worker.

Each row names a rung (or the family of per-shape rungs ``correctness[…]``, ``benchmark[…]``), its
default time limit (``--timeout RUNG=SECONDS`` raises it), what it needs before it can run (the
ladder skips it, saying so, when that is missing) and the figures its line shows. The worker
registers one implementation per row (``ktui.worker.rungs.registry``); the renderer and the
dashboard, which may not import the worker, read the rows. A rung is one module plus its row.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rung:
    name: str
    timeout_s: float
    needs: str  # what must hold before it runs, as its skip message says it
    figures: tuple[str, ...]  # the figures the CLI's line shows, in order (``RungFinished.figures`` keys)
    per_shape: bool = False  # one rung per shape of the reference: ``name[shape]``
    # Runs kernels on a GPU and times nothing: it shares the GPU with other such work and waits for
    # another ktui process's timed section (``ktui.worker.timing.gpu_lock``). The benchmark takes the
    # GPU to itself inside the rung; the others do not run kernels on it.
    shares_gpu: bool = False


# Time limits: short enough that a hung kernel is stopped while the user still waits for it, long
# enough for the slow honest cases (importing CuTeDSL takes seconds; compile traces a real launch
# and compiles every kernel ahead of time, TileLang's through nvcc).
RUNGS: tuple[Rung, ...] = (
    Rung("pre-checks", 60.0, "the kernel file and its reference", ()),
    Rung("compile", 120.0, "pre-checks passed", ("compile_s",), shares_gpu=True),
    Rung("dumps", 30.0, "something compiled", ()),
    Rung("run", 30.0, "compile passed, on a tier that runs the kernel's DSL", ("wall_s",), shares_gpu=True),
    Rung("correctness", 45.0, "the run passed",
         ("max_abs", "max_rel", "rmse", "psnr", "cossim", "mismatched", "nonfinite", "no_signal"), per_shape=True,
         shares_gpu=True),
    Rung("fresh-shapes", 60.0, "correct on every test shape", (), shares_gpu=True),
    Rung("integrity", 45.0, "correct on every test shape", (), shares_gpu=True),
    Rung("dependence", 45.0, "correct on every test shape", (), shares_gpu=True),
    Rung("benchmark", 120.0, "a GPU, and correct on every shape",
         ("kernel_us", "ref_us", "speedup", "speedup_ci", "graph_us", "gbps", "tflops", "roofline", "bound",
          "at_roofline", "impossible", "throttled", "stop", "label"), per_shape=True),
)

BY_NAME: dict[str, Rung] = {rung.name: rung for rung in RUNGS}
DEFAULT_TIMEOUTS: dict[str, float] = {rung.name: rung.timeout_s for rung in RUNGS}


def rung_family(rung: str) -> str:
    """``correctness[rows=4]`` → ``correctness``: timeouts and options are set per family."""
    return rung.split("[", 1)[0]


def expected_rungs(tests: int, benchmarks: int) -> int:
    """How many rungs a ladder reports for a reference of ``tests`` test and ``benchmarks`` benchmark
    shapes (a rung skipped still reports): one per row, one per shape for the per-shape rows."""
    shapes = {"correctness": tests, "benchmark": benchmarks}
    return sum(shapes.get(rung.name, 0) if rung.per_shape else 1 for rung in RUNGS)
