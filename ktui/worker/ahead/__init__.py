"""Compile-ahead: a run's other shapes compiled in helper processes while the ladder climbs.

Triton builds one specialisation per distinct row width, block size or alignment, and it built
them one after another inside the correctness rungs, holding Python's lock for most of each
compile: on the H200 that was half of a softmax's save → verdict. A worker that serves more than
one job (``ktui watch``, ``serve``, an MCP session) keeps a few helper processes
(``pool.AheadPool``). As a run starts, each gets some of its shapes; it imports the same
snapshot of the kernel and its reference, makes inputs for its shapes and calls ``custom_kernel``
with every launch turned into a compile (``Dsl.compiling_only``), which lands in an on-disk cache
every process of the user reads: Triton's own, or ktui's build cache for TileLang's nvcc step
(whose specialisations take a second of nvcc each: a helper builds all of its shapes at once). When
the worker reaches that shape, its own launch finds the kernel built (TileLang: lowered again, its
CUBIN reused). A DSL whose compiled code stays in the process that made it (CuTeDSL's
``cute.compile``) is not compiled ahead.

A helper only warms a cache: whatever it does or fails to do changes no verdict, since the worker
still runs and checks every shape itself. Helpers are the worker's children, confined like it
(the Landlock ruleset is inherited), and end with it.

``inputs``: the other thing made ahead, in the worker itself — the next traced call's inputs, for a
kernel being iterated on.
"""
