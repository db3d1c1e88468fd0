"""One run from the parent's side: the session that snapshots a kernel into a Job, the runner that
hands it to a warm worker and reads its events back, the comparison with earlier versions,
the child processes and how they end.
"""
