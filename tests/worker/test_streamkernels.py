"""ktui calibrate's streaming kernels compute what they claim and count the bytes they move.

Run in a process of their own under Triton's interpreter (TRITON_INTERPRET=1 must be set before
Triton is imported), on CPU buffers: every config of the copy, the add and the sum, on a buffer
that is a whole number of blocks and on one with a ragged tail, then the whole measurement of
``ktui.worker.timing.bandwidth`` with a wall-clock timer.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.worker

SCRIPT = textwrap.dedent("""
    import json, time
    import torch
    from ktui.worker.timing import bandwidth as measuring, streamkernels as sk
    from ktui.measure import bandwidth

    torch.manual_seed(0)
    SMS = 2
    out = {"kernels": [], "progress": []}
    for name, configs in sk.CONFIGS.items():
        for config in configs:
            even = (2 * SMS * (config.per_sm or 1) + 1) * config.block  # persistent programs loop
            for n in (even, 2 * sk.LARGEST_BLOCK + 37):  # whole blocks, and a ragged tail
                a = torch.randint(-50, 50, (n,)).float()
                b = torch.randint(-50, 50, (n,)).float()
                c = torch.full_like(a, float("nan"))
                if name == "copy":
                    stream = sk.copy(a, c, config, SMS)
                    stream.run()
                    right, programs = torch.equal(c, a), None
                elif name == "add":
                    stream = sk.add(a, b, c, config, SMS)
                    stream.run()
                    right, programs = torch.equal(c, a + b), None
                else:
                    stream, partials = sk.total(a, config, SMS)
                    stream.run()
                    right = float(partials.double().sum()) == float(a.double().sum())
                    programs = partials.numel()
                out["kernels"].append({"pattern": name, "label": config.label, "block": config.block,
                                       "per_sm": config.per_sm, "n": n, "right": right, "programs": programs,
                                       "read": stream.bytes_read, "written": stream.bytes_written,
                                       "counted": stream.counted_bytes})

    def timed(fn):
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
        return seconds, {"median_us": seconds * 1e6, "rse": 0.0, "samples": 1, "stop": "test"}

    size = 4 * sk.LARGEST_BLOCK * sk.ELEMENT_BYTES
    patterns = measuring._measure_patterns(size, timed, out["progress"].append, device="cpu", sms=SMS)
    details = {}
    out["ceiling"] = bandwidth.record(size, patterns, details)
    out["details"], out["size"] = details, size
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def interpreted():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_config_of_every_pattern_computes_the_right_values(interpreted):
    kernels = interpreted["kernels"]
    assert {k["pattern"] for k in kernels} == {"copy", "add", "sum"}
    assert [k for k in kernels if not k["right"]] == []


def test_each_pattern_counts_the_bytes_it_really_reads_and_writes(interpreted):
    for k in interpreted["kernels"]:
        n4 = 4 * k["n"]
        if k["pattern"] == "copy":
            assert (k["read"], k["written"]) == (n4, n4), k
        elif k["pattern"] == "add":
            assert (k["read"], k["written"]) == (2 * n4, n4), k
        else:  # read once, and one fp32 partial written per program
            blocks = -(-k["n"] // k["block"])
            programs = min(blocks, k["per_sm"] * 2) if k["per_sm"] else blocks
            assert (k["read"], k["written"], k["programs"]) == (n4, 4 * programs, programs), k
        assert k["counted"] == k["read"] + k["written"]


def test_a_persistent_sum_writes_few_partials_and_loops_over_many_blocks(interpreted):
    persistent = [k for k in interpreted["kernels"] if k["pattern"] == "sum" and k["per_sm"]]
    assert persistent and all(k["programs"] == 2 * k["per_sm"] < -(-k["n"] // k["block"]) for k in persistent)


def test_the_ceiling_is_the_best_pattern_and_every_pattern_keeps_its_labelled_figure(interpreted):
    details, size = interpreted["details"], interpreted["size"]
    patterns = details["bandwidth_patterns"]
    assert {name: p["title"] for name, p in patterns.items()} == {
        "copy": "1:1 copy", "add": "2-read-1-write add", "sum": "read-only sum"}
    assert patterns["copy"]["counted_bytes"] == 2 * size and patterns["add"]["counted_bytes"] == 3 * size
    assert patterns["sum"]["bytes_read"] == size and 0 < patterns["sum"]["bytes_written"] < size // 1000
    assert "torch copy_" in patterns["copy"]["each_gbs"] and len(patterns["add"]["each_gbs"]) == 2
    best = max(patterns, key=lambda name: patterns[name]["gbs"])
    assert interpreted["ceiling"] == patterns[best]["gbs"] == details["bandwidth"]["gbs"]
    assert details["bandwidth"]["pattern"] == best and details["bandwidth"]["kernel"] == patterns[best]["kernel"]
    # the copy's figures stay where calibrations saved before the patterns kept them
    assert details["copy"]["counted_bytes"] == 2 * size and details["copy"]["bytes_per_buffer"] == size
    assert details["copy_torch_gbs"] == patterns["copy"]["each_gbs"]["torch copy_"]
    assert details["copy_triton_gbs"] == max(v for k, v in patterns["copy"]["each_gbs"].items() if k != "torch copy_")


def test_the_measurement_says_which_pattern_it_is_timing(interpreted):
    said = interpreted["progress"]
    assert len(said) == 3 and said[0].startswith("bandwidth 1:1 copy: 1 read + 1 write")
    assert said[1].startswith("bandwidth 2-read-1-write add: 2 reads + 1 write")
    assert said[2].startswith("bandwidth read-only sum: 1 read + 0 writes")
