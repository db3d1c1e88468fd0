"""Runs on a remote GPU over the system's OpenSSH client: the same worker, the same events.

``address`` parses ``--remote``, ``link`` holds the one multiplexed ssh connection, ``sync``
copies the workspace and ktui itself, ``agent`` is what runs on the remote (started as
``python -m ktui.dispatch.remote.agent``), ``worker`` and ``runner`` are the parent's side of a
remote worker, ``check`` is ``ktui remote check``.
"""
