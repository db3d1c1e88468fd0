"""One module per rung of the ladder (``ktui.protocol.rungs`` orders them): precheck, compilation,
dumps, run, correctness, fresh, integrity, dependence, bench; ``registry`` names each row's.
"""
