"""SASS diff: normalisation, deltas on real sm_90a SASS of two versions, base resolution, the CLI."""

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import make_workspace
from test_rooflines import V1, V2, record

from ktui.history import rooflines
from ktui.history.sassdiff import (
    MissingSass,
    NoBase,
    diff_versions,
    normalise,
    resolve_base,
    shape_key,
    unified_diff,
)
from ktui.history.store import Store
from ktui.measure.sass import opcode_counts, split_functions
from ktui.protocol.events import RunFinished, RunStarted

# nvdisasm -c layout: /*address*/ instruction ; — with cuobjdump's encodings on some lines
LISTING_A = """\
        .text.k:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R7, SR_TID.X ;   /* 0x0000000000077919 */
        /*0020*/                   ISETP.GE.AND P2, PT, R7.reuse, 0x1, PT ;
        /*0030*/               @P2 BRA `(.L_x_3) ;
        /*0040*/                   LDG.E R9, desc[UR4][R2.64] ;
.L_x_3:
        /*0050*/                   EXIT ;
.L_x_9:
        /*0060*/                   BRA `(.L_x_9);
        /*0070*/                   NOP;
        /*0080*/                   NOP;
.L_x_10:
"""
# The same code at other addresses, with other register numbers and label numbers.
LISTING_B = """\
        .text.k:
        /*0100*/                   LDC R4, c[0x0][0x28] ;
        /*0110*/                   S2R R12, SR_TID.X ;
        /*0120*/                   ISETP.GE.AND P0, PT, R12, 0x1, PT ;
        /*0130*/               @P0 BRA `(.L_x_41) ;
        /*0140*/                   LDG.E R2, desc[UR6][R8.64] ;
.L_x_41:
        /*0150*/                   EXIT ;
.L_x_50:
        /*0160*/                   BRA `(.L_x_50);
        /*0170*/                   NOP;
"""


@pytest.mark.unit
def test_normalising_drops_addresses_encodings_reuse_flags_and_padding():
    lines = normalise(LISTING_A.splitlines(), "k")
    assert lines == [
        "LDC R0, c[0x0][0x28]",
        "S2R R1, SR_TID.X",
        "ISETP.GE.AND P0, PT, R1, 0x1, PT",
        "@P0 BRA `(.L0)",
        "LDG.E R2, desc[UR0][R3.64]",
        ".L0:",
        "EXIT",
    ]


@pytest.mark.unit
def test_renamed_registers_and_moved_code_are_not_a_difference():
    a, b = normalise(LISTING_A.splitlines(), "k"), normalise(LISTING_B.splitlines(), "k")
    assert a == b
    assert unified_diff(a, b, "a", "b") == []


@pytest.mark.unit
def test_a_real_change_shows_and_register_renumbering_after_it_does_not():
    changed = LISTING_B.replace("LDC R4, c[0x0][0x28] ;", "LDC R4, c[0x0][0x28] ;\n        /*0108*/ MOV R30, RZ ;")
    a, b = normalise(LISTING_A.splitlines(), "k"), normalise(changed.splitlines(), "k")
    assert a != b  # every later register got another number…
    diff = unified_diff(a, b, "v1/k", "v2/k", context=1)
    body = [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert body == ["+MOV R1, RZ"]  # …but only the inserted instruction is a change


@pytest.mark.unit
def test_shape_key_drops_register_numbers_only():
    assert shape_key("@!UP1 LDG.E.128 R12, desc[UR4][R2.64+0x4], P0, PT, RZ, URZ") == \
        "@!UP LDG.E.128 R, desc[UR][R.64+0x4], P, PT, RZ, URZ"


# -- real SASS of two versions (CPU tier, ahead-of-time sm_90a) -------------------------------------

BROKEN = "add_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block, num_warps=4)"


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory, warm_ktui):
    """add_triton v1 (BLOCK 1024), v2 (BLOCK 512), v3 (fails to compile): three real `ktui run`s."""
    root = make_workspace(tmp_path_factory.mktemp("ws"), kernels=["add_triton"])
    kernel = root / "kernels" / "add_triton.py"
    original = kernel.read_text()
    procs = [warm_ktui("run", "--no-audit", "--seed", "1", "kernels/add_triton.py", cwd=root)]
    kernel.write_text(original.replace("block = 1024", "block = 512"))
    procs.append(warm_ktui("run", "--no-audit", "--seed", "1", "kernels/add_triton.py", cwd=root))
    kernel.write_text(original.replace("tl.store(out_ptr + offsets, x + y, mask=mask)",
                                       "tl.store(out_ptr + offsets, x + y + undefined_name, mask=mask)"))
    procs.append(warm_ktui("run", "--no-audit", "--seed", "1", "kernels/add_triton.py", cwd=root))
    assert [p.returncode for p in procs] == [0, 0, 1], [p.stdout for p in procs]
    kernel.write_text(original.replace("block = 1024", "block = 512"))  # the file is v2 again
    return root


def _raw_counts(root: Path, version: int, fn: str):
    sass = (root / ".ktui" / "runs" / "add_triton" / str(version) / f"{fn}.sass").read_text()
    return opcode_counts(split_functions(sass)[fn])


@pytest.mark.worker
def test_opcode_deltas_match_counts_of_the_raw_listings(two_versions):
    root = two_versions
    diff = diff_versions(root / ".ktui", "add_triton", 1, 2)
    (f,) = diff.functions
    assert f.name == "add_kernel" and f.status == "changed"
    raw1, raw2 = _raw_counts(root, 1, "add_kernel"), _raw_counts(root, 2, "add_kernel")
    assert f.opcode_deltas, "halving the block must change the instruction mix"
    for op, base, new in f.opcode_deltas:
        if op not in ("NOP", "BRA"):  # the padding and trap loop after EXIT are not counted
            assert (base, new) == (raw1[op], raw2[op]), op
    padding = {"NOP", "BRA"}
    assert {op for op in set(raw1) | set(raw2) if raw1[op] != raw2[op]} - padding <= {op for op, _, _ in f.opcode_deltas}
    deltas = sorted((abs(n - b) for _, b, n in f.opcode_deltas), reverse=True)
    assert deltas == [abs(n - b) for _, b, n in f.opcode_deltas]  # largest change first


@pytest.mark.worker
def test_resource_deltas_come_from_each_versions_resources_json(two_versions):
    root = two_versions
    (f,) = diff_versions(root / ".ktui", "add_triton", 1, 2).functions
    for key in ("registers", "spill_instructions", "shared", "local", "stack"):
        expected = tuple(json.loads((root / ".ktui" / "runs" / "add_triton" / str(v) / "resources.json").read_text())
                         ["add_kernel"][key] for v in (1, 2))
        assert f.resources[key] == expected, key
    for version, count in zip((1, 2), f.instructions):
        raw = _raw_counts(root, version, "add_kernel")
        assert count == sum(raw.values()) - raw["NOP"] - 1  # less the NOP padding and the trap BRA
    assert f.instructions[0] > f.instructions[1]  # half the block, fewer unrolled loads and stores


@pytest.mark.worker
def test_a_version_against_itself_is_the_same(two_versions):
    (f,) = diff_versions(two_versions / ".ktui", "add_triton", 2, 2).functions
    assert f.status == "same" and f.unified == [] and f.opcode_deltas == []


@pytest.mark.worker
def test_a_version_that_never_compiled_has_no_sass_and_says_so(two_versions):
    with pytest.raises(MissingSass, match=r"add_triton v3 has no SASS"):
        diff_versions(two_versions / ".ktui", "add_triton", 2, 3)


@pytest.mark.worker
def test_previous_skips_failed_versions_and_pinned_follows_the_pin(two_versions):
    store = Store(two_versions / ".ktui" / "history.db")
    assert resolve_base(store, "add_triton", 2, "previous") == 1
    assert resolve_base(store, "add_triton", 3, "previous") == 2
    with pytest.raises(NoBase, match="first version"):
        resolve_base(store, "add_triton", 1, "previous")
    with pytest.raises(NoBase, match="no baseline is pinned"):
        resolve_base(store, "add_triton", 2, "pinned")
    store.pin("add_triton", 1)
    assert resolve_base(store, "add_triton", 2, "pinned") == 1
    store.unpin("add_triton")
    assert store.pinned("add_triton") is None
    with pytest.raises(NoBase, match="measured speedup"):
        resolve_base(store, "add_triton", 2, "best")  # CPU tier: nothing was timed
    with pytest.raises(NoBase, match="no version 9"):
        resolve_base(store, "add_triton", 2, "9")
    with pytest.raises(NoBase, match="unknown base"):
        resolve_base(store, "add_triton", 2, "fastest")


@pytest.mark.worker
def test_diff_cli_prints_the_facts_before_the_unified_diff(two_versions, warm_ktui):
    proc = warm_ktui("diff", "kernels/add_triton.py", cwd=two_versions)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("add_triton: SASS v1 → v2")
    assert re.search(r"registers \d+ → \d+ \([+-]\d+\)", out)
    assert out.index("opcodes:") < out.index("--- v1/add_kernel") < out.index("+++ v2/add_kernel")
    assert out.index("+++ v2/add_kernel") < out.index("per line (SASS instructions): v1 → v2")


@pytest.mark.worker
def test_diff_cli_json_is_one_object_for_agents(two_versions, warm_ktui):
    proc = warm_ktui("diff", "kernels/add_triton.py", "--json", cwd=two_versions)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["base_version"], data["new_version"], data["base"], data["identical"]) == (1, 2, "previous", False)
    (f,) = data["functions"]
    assert f["name"] == "add_kernel" and f["unified"][0] == "--- v1/add_kernel"
    assert all(len(d) == 3 for d in f["opcode_deltas"]) and f["resources"]["registers"][0] > 0
    lines = data["lines"]
    assert (lines["base_version"], lines["new_version"], lines["source"]) == (1, 2, "add_triton.py")
    assert all(r["base_line"] == r["new_line"] for r in lines["rows"])  # only BLOCK changed: no line moved


@pytest.mark.worker
def test_diff_cli_without_a_base_explains_and_exits_1(two_versions, warm_ktui):
    proc = warm_ktui("diff", "kernels/add_triton.py", "--version", "1", cwd=two_versions)
    assert proc.returncode == 1 and "first version" in proc.stderr
    proc = warm_ktui("diff", "kernels/add_triton.py", "--base", "pinned", "--json", cwd=two_versions)
    assert proc.returncode == 1 and "no baseline is pinned" in json.loads(proc.stdout)["error"]
    proc = warm_ktui("diff", "kernels/nope.py", cwd=two_versions)
    assert proc.returncode == 2


@pytest.mark.worker
def test_pin_cli_sets_the_baseline_diff_uses(two_versions, warm_ktui):
    assert warm_ktui("pin", "kernels/add_triton.py", "1", cwd=two_versions).returncode == 0
    proc = warm_ktui("diff", "kernels/add_triton.py", "--base", "pinned", "--json", cwd=two_versions)
    assert json.loads(proc.stdout)["base_version"] == 1
    assert warm_ktui("pin", "kernels/add_triton.py", "--clear", cwd=two_versions).returncode == 0
    assert warm_ktui("pin", "kernels/add_triton.py", "12", cwd=two_versions).returncode == 1


def _run(store: Store, run_id: str, version: int, verdict: str, speedup: float | None, t: float) -> None:
    store.version_for("k", f"hash{version}", "/k.py")
    store.record(RunStarted(run_id, kernel="k", path="/k.py", version=version, content_hash=f"hash{version}",
                            reference="/r.py", reference_hash="", tier="gpu", device="H200", arch="sm_90a",
                            run_dir="/d", time=t))
    summary = {"speedup": speedup} if speedup is not None else {}
    store.record(RunFinished(run_id, verdict=verdict, summary=summary))


@pytest.mark.unit
def test_best_is_the_fastest_passing_version_other_than_the_new_one(tmp_path):
    store = Store(tmp_path / "history.db")
    _run(store, "a", 1, "passed", 1.5, 1.0)
    _run(store, "b", 2, "passed", 2.5, 2.0)
    _run(store, "c", 3, "failed", 9.0, 3.0)  # fast but wrong: never a base
    _run(store, "d", 4, "passed", 3.0, 4.0)
    assert resolve_base(store, "k", 4, "best") == 2
    assert resolve_base(store, "k", 5, "best") == 4
    assert resolve_base(store, "k", 4, "previous") == 2  # v3's last run failed


@pytest.mark.unit
def test_a_compiled_version_is_a_previous_base_but_never_the_best(tmp_path):
    """CuTeDSL on the CPU tier: every version only compiles, and its SASS is still worth a diff."""
    store = Store(tmp_path / "history.db")
    _run(store, "a", 1, "compiled", None, 1.0)
    _run(store, "b", 2, "failed", None, 2.0)
    assert resolve_base(store, "k", 3, "previous") == 1
    with pytest.raises(NoBase, match="passed with a measured speedup"):
        resolve_base(store, "k", 3, "best")
    _run(store, "c", 3, "compiled", 99.0, 3.0)  # a speedup on a compiled run is no measurement: never best
    with pytest.raises(NoBase):
        resolve_base(store, "k", 4, "best")


@pytest.mark.unit
def test_recorded_h200_sass_of_two_versions_gives_the_same_facts_as_its_raw_counts(tmp_path):
    """SASS compiled on the H200 (tests/fixtures/gpu/sass, see its README), laid out as ktui stores it."""
    fixtures = Path(__file__).parents[1] / "fixtures" / "gpu" / "sass"
    if not (fixtures / "add_triton_v1.sass").is_file():
        pytest.skip("recorded H200 SASS not checked in yet (run tests/benchmarks/record_gpu_fixtures.sh on the H200)")
    raw = {}
    for v in (1, 2):
        run_dir = tmp_path / "runs" / "add_triton" / str(v)
        run_dir.mkdir(parents=True)
        (run_dir / "add_kernel.sass").write_text((fixtures / f"add_triton_v{v}.sass").read_text())
        (run_dir / "resources.json").write_text((fixtures / f"add_triton_v{v}.resources.json").read_text())
        raw[v] = opcode_counts(split_functions((run_dir / "add_kernel.sass").read_text())["add_kernel"])
    (f,) = diff_versions(tmp_path, "add_triton", 1, 2).functions
    assert f.status == "changed" and f.opcode_deltas
    for op, base, new in f.opcode_deltas:
        if op not in ("NOP", "BRA"):
            assert (base, new) == (raw[1][op], raw[2][op]), op
    assert f.resources["registers"][0] > 0 and f.resources["registers"][1] > 0


@pytest.mark.worker
def test_a_cutedsl_kernel_whose_mangled_symbol_changed_is_still_paired(tmp_path, warm_ktui):
    """CuTeDSL mangles the tile layout into the symbol: halving ILP renames the GPU function."""
    root = make_workspace(tmp_path / "ws", kernels=["add_cutedsl"])
    kernel = root / "kernels" / "add_cutedsl.py"
    assert warm_ktui("run", "--no-audit", "--seed", "1", "kernels/add_cutedsl.py", cwd=root).returncode == 0
    kernel.write_text(re.sub(r"^ILP = 4\b", "ILP = 2", kernel.read_text(), flags=re.M))
    assert warm_ktui("run", "--no-audit", "--seed", "1", "kernels/add_cutedsl.py", cwd=root).returncode == 0
    (f,) = diff_versions(root / ".ktui", "add_cutedsl", 1, 2).functions
    assert f.status == "changed" and f.base_name and f.base_name != f.name
    assert f.instructions[1] < f.instructions[0]  # half the independent accesses per thread
    assert any(op.startswith("LDG.E") and new < base for op, base, new in f.opcode_deltas)


@pytest.mark.worker
def test_a_cancelled_rerun_does_not_hide_a_version_that_passed(two_versions):
    from ktui.protocol.events import RunFinished, RunStarted

    store = Store(two_versions / ".ktui" / "history.db")
    store.record(RunStarted("rerun", kernel="add_triton", path="/k.py", version=2, content_hash="h", reference="/r.py",
                            reference_hash="r", tier="cpu", device="CPU", arch="sm_90a", run_dir="/d"))
    store.record(RunFinished("rerun", verdict="cancelled"))
    assert resolve_base(store, "add_triton", 3, "previous") == 2


# -- the two versions' per-shape roofline figures beside their SASS --------------------------------
def gpu_figures_for(root, versions: dict[int, dict]) -> None:
    """Benchmarked runs of these versions, as a GPU run would have recorded them (the SASS stays the CPU tier's)."""
    store = Store(root / ".ktui" / "history.db")
    for version, summary_ in versions.items():
        record(store, f"gpu-{version}", version, "passed", summary_, 1e10 + version)
    store.close()


@pytest.mark.worker
def test_ktui_diff_compares_the_two_versions_per_shape(two_versions, tmp_path, warm_ktui):
    root = tmp_path / "ws"
    shutil.copytree(two_versions, root)
    gpu_figures_for(root, {1: V1, 2: V2})
    proc = warm_ktui("diff", "kernels/add_triton.py", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("\n".join(rooflines.lines(1, V1, 2, V2)))
    data = json.loads(warm_ktui("diff", "kernels/add_triton.py", "--json", cwd=root).stdout)
    assert data["roofline"] == {"shapes": rooflines.compare(V1, V2), "satisfied": False, "short": ["size=4194304"],
                                "base_satisfied": False, "provisional": None}


@pytest.mark.worker
def test_ktui_diff_of_versions_never_benchmarked_says_there_are_no_figures(two_versions, warm_ktui):
    proc = warm_ktui("diff", "kernels/add_triton.py", cwd=two_versions)
    assert proc.stdout.rstrip().endswith("attainable per shape: no per-shape roofline figures (not benchmarked on a "
                                         "GPU, or recorded before them) in v1 or v2")
    data = json.loads(warm_ktui("diff", "kernels/add_triton.py", "--json", cwd=two_versions).stdout)
    assert data["roofline"] == {"shapes": [], "satisfied": None, "short": None, "base_satisfied": None,
                                "provisional": None}
