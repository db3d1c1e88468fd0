"""The watch loop, in the parent: file events become saves, saves become jobs, one run at a time
per kernel, the newest save first.
"""
