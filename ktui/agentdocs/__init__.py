"""The documents agents search (`context/`): where they come from and the full-text index over
them.
"""
