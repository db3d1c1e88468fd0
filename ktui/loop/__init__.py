"""The verification loop: a pure pipeline of rungs that emits events."""
