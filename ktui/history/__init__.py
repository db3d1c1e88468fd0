"""What stays after a run: the SQLite history (``Store``), the report files, and the SASS diff
between two stored versions.
"""
