"""`ktui`: the command line, arguments in, calls out.
"""
