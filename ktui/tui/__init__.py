"""The dashboard (`ktui watch`): a Textual app fed by the watch loop. Attributes go down to the
panes, messages come up; one pane per file in ``panes/``, styles in ``app.tcss``.
"""
