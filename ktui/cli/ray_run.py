"""``--ray [ADDRESS]`` (``ktui run``, ``ktui serve``): the Ray placement of the run queue, one
``RayRunner`` per actor (``ktui.dispatch.ray_pool``), and the plain printer of runs that interleave."""

from __future__ import annotations

import argparse
import sys

from ktui.cli.options import worker_config


def ray_pool(args: argparse.Namespace, fresh_each_run: bool = False):
    """The ``RayPool`` that ``--ray`` asks for, or None once it has said why there is none (Ray is
    not installed, no cluster answers at the address)."""
    from ktui.dispatch.ray_pool import RayMissing, RayPool  # deferred: Ray is an optional extra

    try:
        return RayPool(args.ray, worker_config(args), fresh_each_run=fresh_each_run)
    except RayMissing as exc:
        print(f"ktui: {exc}", file=sys.stderr)
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
        print(f"ktui: could not join the Ray cluster at {args.ray}: {exc}", file=sys.stderr)
    return None


class ByRun:
    """A consumer that holds each run's events and hands them to ``printer`` when the run ends:
    the runs of different actors interleave, and each kernel's rungs stay under its header."""

    def __init__(self, printer):
        self.printer = printer
        self._held: dict[str, list] = {}

    def __call__(self, event) -> None:
        held = self._held.setdefault(event.run_id, [])
        held.append(event)
        if event.type == "run_finished":
            for each in self._held.pop(event.run_id):
                self.printer(each)
