"""One module per rung of the ladder, in the order they run: precheck, compile, dumps, run,
correctness, integrity (in ``ktui.worker.integrity``), dependence, bench.
"""
