"""``ktui mcp``: the loop as tools for coding agents, over the Model Context Protocol.

The server is a parent-side process like ``ktui run``: it never imports user code. ``server``
declares the tools; ``workspace`` keeps every path inside the workspace; ``runs`` drives the
warm worker and turns cancellation into a killed process group; ``child_calls`` does the same for
``profile`` and ``sanitize``, which run the CLI in a child; ``digest`` trims reports to what
an agent reads first; ``dumps`` pages through compiler output; ``audit_and_output_tools`` adds
``audit`` (``audits``), ``output`` (``printed``) and the run folders' files as resources;
``declared`` gives every tool its hints and answer schema.
"""
