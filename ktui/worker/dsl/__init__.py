"""What ktui knows of each kernel language inside the worker: one adapter per DSL behind
``base.Dsl`` (Triton with its interpreter, CuTeDSL, TileLang), listed in ``registry``; Proton's scopes.
"""
