"""The worker process, the one place user code and torch run: the ladder of rungs, their context,
the problem formats' adapters, the DSLs' adapters (Triton, CuTeDSL, TileLang), metrics and the integrity checks.
"""
