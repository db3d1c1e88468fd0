"""The parent's view of a workspace, read as text (no user code runs here): kernels and their
references, their hashes, problem formats, `ktui init`'s scaffold and templates.
"""
