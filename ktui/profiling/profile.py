"""``ktui profile``: one benchmark shape of a kernel under Nsight Compute, summarised.

The kernel runs in ``python -m ktui.worker.target`` (loaded exactly as the worker loads it) under
``ncu --nvtx --nvtx-include ktui_custom_kernel/``: warm-up calls first, outside the range, then
one call of ``custom_kernel`` inside it, so ncu profiles the kernel's own launches and nothing
else. ``--clock-control none`` by default, so durations compare with the benchmark (which runs at
the clocks the GPU chooses). The ``.ncu-rep`` stays in ``.ktui/runs/<kernel>/<version>/`` for the
Nsight Compute GUI, next to ``ncu.json`` and ``ncu.txt``; the history keeps each profile.

Every failure ends in a message that says what happened and what to do: ncu missing (and where
it usually is), counters locked (``ERR_NVGPUCTRPERM``), no GPU, the kernel crashing under replay,
the time limit.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.history.store import Store
from ktui.profiling import ncu as ncu_summary
from ktui.profiling import sections as proton_sections
from ktui.profiling.external import (
    Progress,
    Target,
    ToolFailed,
    ToolRun,
    describe_exit,
    find,
    preflight,
    prepare,
    require_gpu,
    require_loaded,
    require_visible_gpu,
    tool_env,
)
from ktui.profiling.hosts import LocalHost, ToolHost
from ktui.profiling.ncu import source as ncu_source
from ktui.protocol.processes import NVTX_RANGE

NCU_PATTERNS = (
    "/usr/local/cuda-*/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)
NCU_MISSING = (
    "ncu (Nsight Compute) is not installed or not found: looked at $KTUI_NCU, PATH, $CUDA_HOME/bin, "
    "/usr/local/cuda/bin and /opt/nvidia/nsight-compute/<version>/. It ships with the CUDA toolkit "
    "(/usr/local/cuda/bin/ncu) and as a standalone download; put it on PATH or set KTUI_NCU=/path/to/ncu."
)
PERMISSION_HELP = (
    "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM). Allow profiling for all users with "
    "`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in a file under /etc/modprobe.d/, then reload the "
    "nvidia kernel module or reboot; or run `ktui profile` as root (in a container the container also needs "
    "the SYS_ADMIN capability). See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
# ktui's "basic": ncu's basic sections plus warp states and the L2 hit rate, so every figure of the
# summary is collected; any other name is passed to ncu's --set as it is.
BASIC_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats")
BASIC_METRICS = ("lts__t_sector_hit_rate.pct",)
# Every set also collects the per-instruction page (warp-state samples, instructions executed, memory
# per SASS instruction) with the source embedded: the hot lines come from it (``ncu/source.py``).
SOURCE_ARGS = ("--section", "SourceCounters", "--import-source", "yes")
DEFAULT_TIMEOUT_S = 600.0


@dataclass
class ProfileOptions:
    set: str = "basic"
    shape: int = 0  # index into the reference's BENCHMARKS (TESTS when it has none)
    clock_control: str = "none"
    timeout_s: float = DEFAULT_TIMEOUT_S
    warmup: int = 2
    seed: int = 0


def find_ncu(host: ToolHost | None = None) -> str:
    return find(host or LocalHost(), "ncu", "KTUI_NCU", NCU_PATTERNS, NCU_MISSING)


def collection_args(set_name: str) -> list[str]:
    if set_name == "basic":
        args = []
        for section in BASIC_SECTIONS:
            args += ["--section", section]
        return args + [*SOURCE_ARGS, "--metrics", ",".join(BASIC_METRICS)]
    return ["--set", set_name, *SOURCE_ARGS]


def ncu_command(ncu: str, options: ProfileOptions, report_stem: Path | str, target_argv: list[str]) -> list[str]:
    return [
        ncu,
        "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/",  # push/pop range: the trailing slash
        "--clock-control", options.clock_control,
        *collection_args(options.set),
        "--export", str(report_stem), "--force-overwrite",
        *target_argv,
    ]


def explain_ncu_failure(run: ToolRun, result: dict | None, timeout_s: float) -> str:
    """What went wrong under ncu, in words that say what to do."""
    output = run.output
    if run.timed_out:
        return (f"the profile exceeded its {timeout_s:g} s limit; ncu and the kernel's process were killed. "
                "Allow more with --timeout SECONDS (--set full replays each kernel dozens of times).")
    if "ERR_NVGPUCTRPERM" in output:
        return PERMISSION_HELP
    if result is not None and result.get("error_kind") == "raised":
        return f"custom_kernel raised under ncu: {result.get('error', '')}"
    if result is not None and result.get("error_kind") == "no_gpu":
        return "no GPU: the profiled process saw no CUDA device"
    errors = [line for line in output.splitlines() if line.startswith("==ERROR==")]
    if result is None or (not result.get("ok") and run.returncode not in (0, None)):
        detail = "\n".join(errors[-4:]) or run.tail()
        return (f"the kernel's process crashed under ncu ({describe_exit(run.returncode)}), e.g. a kernel that "
                f"faults under replay; `ktui sanitize` finds illegal accesses. ncu said:\n{detail}")
    if "No kernels were profiled" in output:
        return ("ncu profiled no kernel: custom_kernel launched none inside the NVTX range on this shape "
                f"(ncu said: {next((l for l in output.splitlines() if 'No kernels were profiled' in l), '')})")
    if errors:
        return "ncu failed: " + "\n".join(errors[-4:]) + "\n(an unknown --set or section name? try --set full)"
    return f"ncu failed ({describe_exit(run.returncode)}):\n{run.tail()}"


def profile(path: Path, options: ProfileOptions, progress: Progress = lambda message: None,
            reference: Path | None = None, host: ToolHost | None = None) -> ncu_summary.NcuSummary:
    """Profile one kernel file (judged by ``reference`` as in ``ktui run``) here or on ``host``;
    raises ``CannotRun`` (exit 2) or ``ToolFailed`` (exit 1)."""
    target = prepare(path, reference=reference, host=host)
    try:
        ncu = find_ncu(target.host)
        require_visible_gpu(target.host, "ncu profiling")
        progress(f"loading {target.kernel.id} v{target.job.version}{target.host.progress_suffix}")
        check = preflight(target, options.shape)
        require_loaded(check)
        require_gpu(check, "ncu profiling", target.host.where)
        return run_ncu(target, ncu, options, progress)
    finally:
        target.close()


def run_ncu(target: Target, ncu: str, options: ProfileOptions, progress: Progress = lambda m: None) -> ncu_summary.NcuSummary:
    """ncu around the target (after the pre-flight said there is a GPU), then the summary and its files."""
    shape = target.check.get("shape", {})
    progress(f"profiling {target.kernel.id} v{target.job.version} on {ncu_summary.shape_text(shape)} "
             f"with ncu (set {options.set}, clock control {options.clock_control})")
    report = (target.run_dir / ncu_summary.REPORT_STEM).with_suffix(".ncu-rep")
    report.unlink(missing_ok=True)
    result_path = target.on_host("result.json")
    argv = target.argv("ncu", result_path, shape=options.shape, warmup=options.warmup, seed=options.seed)
    run = target.host.run(ncu_command(ncu, options, target.in_run_dir(ncu_summary.REPORT_STEM), argv),
                          options.timeout_s, tool_env(ncu))
    result = target.result(result_path)
    target.host.collect()  # the report comes back into the local run folder
    (target.run_dir / "ncu.log").write_text(run.output)
    if run.timed_out or not report.is_file() or result is None or not result.get("ok") or "ERR_NVGPUCTRPERM" in run.output:
        raise ToolFailed(explain_ncu_failure(run, result, options.timeout_s))
    progress("reading the report")
    try:
        summary = summarise(ncu, report, target, options, result)
    except ncu_summary.NcuParseError as exc:
        raise ToolFailed(f"ncu's export of {report} could not be read: {exc}") from exc
    ncu_summary.write(target.run_dir, summary)
    _record(target, "ncu", summary.to_json(), str(report))
    return summary


def export_csv(ncu: str, report: Path, page: str, timeout_s: float = 300.0, host: ToolHost | None = None,
               on_host: str = "", extra: tuple[str, ...] = ()) -> str:
    """A page of the report as CSV, by the ncu that wrote it (on ``host``, the report there being ``on_host``)."""
    argv = [ncu, "--import", on_host or str(report), "--csv", "--page", page, "--print-units", "base", *extra]
    run = (host or LocalHost()).run(argv, timeout_s)
    if run.timed_out or run.returncode != 0:
        raise ToolFailed(f"ncu could not export the {page} page of {report} ({describe_exit(run.returncode)}):\n{run.tail()}")
    return run.output


def summarise(ncu: str, report: Path, target: Target, options: ProfileOptions, result: dict) -> ncu_summary.NcuSummary:
    host, on_host = target.host, target.in_run_dir(report.name)
    details_csv = export_csv(ncu, report, "details", host=host, on_host=on_host)
    (report.parent / "ncu_details.csv").write_text(details_csv)
    notes: list[str] = []
    launches = None
    module = None if host.remote else ncu_report_module(ncu)  # NVIDIA's module sits next to a local ncu only
    if module is not None:
        try:
            launches = ncu_summary.launches_from_report(module, report)
        except Exception as exc:
            notes.append(f"the ncu_report module could not read the report ({exc}); read the CSV export instead")
    if launches is None:
        raw_csv = export_csv(ncu, report, "raw", host=host, on_host=on_host)
        (report.parent / "ncu_raw.csv").write_text(raw_csv)
        launches = ncu_summary.parse_raw(raw_csv)
    merged = ncu_summary.merge(launches, ncu_summary.parse_details(details_csv))
    if not merged:
        raise ToolFailed(f"the report {report} holds no kernel launch")
    kernels = ncu_summary.summarise_launches(merged)
    expected = result.get("launches")
    if isinstance(expected, int) and expected != len(merged):
        notes.append(f"custom_kernel made {expected} Triton launch(es) but ncu profiled {len(merged)} "
                     "(library kernels such as torch's are profiled too)")
    notes += ncu_summary.missing_notes(kernels)
    hot = hot_lines(ncu, report, target, notes)
    return ncu_summary.NcuSummary(
        kernel=target.kernel.id,
        version=target.job.version,
        content_hash=target.job.content_hash,
        shape=result.get("shape", {}),
        set=options.set,
        device=ncu_summary.device_name(merged) or result.get("device", ""),
        created=time.time(),
        report_path=str(report),
        kernels=kernels,
        total_duration_us=round(sum(k.duration_us for k in kernels), 3),
        notes=notes,
        clock_control=options.clock_control,
        hotspots=hot,
    )


def hot_lines(ncu: str, report: Path, target: Target, notes: list[str]) -> dict:
    """The source page exported and put on the kernel's lines (empty, with a note, when it cannot be)."""
    try:
        text = export_csv(ncu, report, "source", host=target.host, on_host=target.in_run_dir(report.name),
                          extra=("--print-source", "sass"))
        (report.parent / ncu_source.SOURCE_CSV).write_text(text)
        page = ncu_source.parse_source_page(text)
    except (ToolFailed, ncu_source.SourcePageError) as exc:
        notes.append(f"no hot lines: the source page could not be read ({str(exc).splitlines()[0]})")
        return {}
    data = ncu_source.aggregate_run(page, target.run_dir, target.kernel.path.name)
    (report.parent / ncu_source.MEASURED_FILE).write_text(json.dumps(data, indent=2))
    notes += data["notes"]
    return data


def ncu_report_module(ncu: str):
    """NVIDIA's ``ncu_report`` module, importable or found next to the ncu in use (extras/python)."""
    try:
        import ncu_report  # type: ignore[import-not-found]

        return ncu_report
    except ImportError:
        pass
    real = Path(ncu).resolve()
    candidates = [real.parent / "extras" / "python", *real.parent.parent.glob("nsight-compute*/extras/python")]
    for folder in candidates:
        if (folder / "ncu_report.py").is_file():
            sys.path.insert(0, str(folder))
            try:
                import ncu_report  # type: ignore[import-not-found]

                return ncu_report
            except Exception:
                sys.path.remove(str(folder))
    return None


def _record(target: Target, kind: str, summary: dict, report_path: str) -> None:

    store = Store.of(target.state)
    try:
        store.record_profile(target.kernel.id, target.job.version, kind, summary, report_path)
    finally:
        store.close()


# -- in-kernel sections ----------------------------------------------------------------------------


def profile_sections(path: Path, options: ProfileOptions, progress: Progress = lambda message: None,
                     reference: Path | None = None, host: ToolHost | None = None) -> proton_sections.SectionsReport:
    """Time the Proton scopes inside a Triton kernel on one benchmark shape, here or on ``host``."""
    target = prepare(path, reference=reference, host=host)
    try:
        require_visible_gpu(target.host, "Proton's in-kernel instrumentation")
        progress(f"loading {target.kernel.id} v{target.job.version}")
        check = preflight(target, options.shape, proton=True)
        require_loaded(check)
        support = check.get("proton") or {}
        if not support.get("supported"):
            raise ToolFailed(f"in-kernel sections are not supported here: {support.get('reason', 'unknown')}")
        require_gpu(check, "Proton's in-kernel instrumentation", target.host.where)
        progress(f"running {target.kernel.id} under Proton ({support.get('reason')})")
        output = target.run_dir / proton_sections.HATCHET_STEM
        Path(str(output) + ".hatchet").unlink(missing_ok=True)
        result_path = target.on_host("result.json")
        argv = target.argv("sections", result_path, shape=options.shape, warmup=options.warmup, seed=options.seed,
                           output=target.in_run_dir(proton_sections.HATCHET_STEM))
        run = target.host.run(argv, options.timeout_s)
        result = target.result(result_path)
        target.host.collect()
        if run.timed_out:
            raise ToolFailed(f"the sections profile exceeded its {options.timeout_s:g} s limit and was killed")
        if result is None:
            raise ToolFailed(f"the kernel's process crashed under Proton ({describe_exit(run.returncode)}):\n{run.tail()}")
        if not result.get("ok"):
            raise ToolFailed(f"the sections profile failed: {result.get('error', '')}")
        hatchet = Path(result.get("hatchet", str(output) + ".hatchet"))
        try:
            metric, sections = proton_sections.read_hatchet(hatchet)
        except proton_sections.NoSections as exc:
            raise ToolFailed(str(exc)) from exc
        report = proton_sections.SectionsReport(
            kernel=target.kernel.id, version=target.job.version, content_hash=target.job.content_hash,
            shape=result.get("shape", {}), device=result.get("device", ""), triton=support.get("triton", ""),
            created=time.time(), hatchet_path=str(hatchet), sections=sections, metric=metric,
        )
        proton_sections.write(target.run_dir, report)
        _record(target, "sections", report.to_json(), str(hatchet))
        return report
    finally:
        target.close()
