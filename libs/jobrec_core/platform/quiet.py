"""Warnings of third-party libraries that say nothing actionable, silenced where they start."""

from __future__ import annotations

import warnings


def quiet_petastorm() -> None:
    """petastorm 0.13 uses pyarrow's legacy dataset API, the only one its pinned pyarrow 14
    supports (STACK.md), and leaves a file handle to the garbage collector; the warnings on
    every read say nothing actionable. Called again before each read, because torch's lazy
    imports put a catch-all "once" filter in front of earlier ones."""
    for category in (FutureWarning, ResourceWarning):
        warnings.filterwarnings("ignore", category=category, module=r"petastorm(\.|$)")
