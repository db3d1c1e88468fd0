"""What ktui knows of each kernel language inside the worker: Triton launches and the interpreter,
CuTeDSL's compiled functions, Proton's scopes.
"""
