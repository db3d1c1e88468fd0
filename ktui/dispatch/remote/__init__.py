"""Runs on a remote GPU over the system's OpenSSH client: the same worker, the same events.

``address`` parses ``--remote``, ``link`` holds the one multiplexed ssh connection, ``sync``
copies the workspace and ktui itself, ``agent`` is what runs on the remote (started as
``python -m ktui.dispatch.remote.agent``), ``transport`` is a worker there as the parent reaches it
(``ssh host agent launch``), ``runner`` stages each job there and runs it over that transport,
``check`` is ``ktui remote check``.
"""
