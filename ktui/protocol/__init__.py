"""What every ktui process agrees on, importing nothing of ktui: the events a run emits, the Job
the parent sends, the `.ktui/` layout, atomic files and the process tree's plumbing.
"""
