"""``ktui audit``'s worker side: does a problem's test tell a right kernel from a trivial one?

What a harness measures is what an agent optimises, so ktui tests its own tests. For one reference
(native, GPU MODE or KernelBench, loaded through ``ktui.worker.formats``), on the same test shapes a
kernel is judged on and with fresh seeds:

- ``draws``: per shape, inputs from two seeds (the first one drawn twice) and the reference's
  answers to them;
- ``mutants``: trivial candidates built from those (zeros, a copy of an input, the answer rounded
  through bf16, the previous call's answer…), each judged by ``ktui.worker.judgement.judge``, the
  judgement a real kernel gets;
- ``reference_checks``: the reference itself — reproducible, seed-dependent, not near zero or
  constant, influenced by every input;
- ``verdict``: ``strong``, or ``weak`` with every reason in words a user can act on.

It runs in a process of its own (``python -m ktui.worker.audit``), because it calls user code; the
parent (``ktui.dispatch.auditor``) starts it, caches its answer and shows it. Mutants are values in this
process, never files and never versions in the history.
"""
