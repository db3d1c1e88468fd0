"""Which seeds a run's inputs are made from: the problem's own, and fresh ones that keep their meaning.

Every checked call gets inputs from a fresh seed, so that an answer cannot be memorised. A seed
can be more than a random state, though: GPU MODE's ``sort_py`` adds it to the values it draws, and
seeds of 2³¹ make rows of values around 1e9 that float32 rounds to one constant (already sorted).
So where a problem declares seeds (GPU MODE's ``task.yml``, ``seed`` in a native reference's
``TESTS``):

- ``ranges``: fresh seeds come from the span of the declared ones, widened to at least
  ``MIN_FRESH`` seeds around it when it is narrower; with none declared, from 1 to 2³¹ − 2;
- ``kinds``: what kind of inputs one draw makes, per input (its form, distinct values, sortedness,
  NaN, the size of its values), and whether a fresh draw lies outside what the problem's own
  seeds make;
- ``choice``: before the checks (once per reference version in a process), inputs from fresh
  seeds are compared with those the problem's own seeds make; where they differ in kind, fresh
  seeds come from the declared span itself, and failing that from the declared seeds alone, and
  the run says so.

The declared seeds are also run: each ``correctness[<shape>]`` rung checks its case's own seed,
then fresh ones (``rungs/correctness.py``), so a kernel the problem's own evaluator fails never
passes.
"""
