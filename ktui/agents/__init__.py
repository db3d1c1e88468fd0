"""``ktui mcp``: the loop as tools for coding agents, over the Model Context Protocol.

The server is a parent-side process like ``ktui run``: it never imports user code. ``server``
declares the tools; ``workspace`` keeps every path inside the workspace; ``runs`` drives the
warm worker and turns cancellation into a killed process group; ``digest`` trims reports to what
an agent reads first; ``dumps`` pages through compiler output.
"""
