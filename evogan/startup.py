"""Process start-up: torch imports with Python's cyclic garbage collector paused.

Importing torch creates a few hundred thousand objects that live as long as the process. With
the collector's default thresholds Python walks them again and again while they are being
made: about 0.6 s of the 2.3 s of CPU that every process, and so every MPI rank, spent
importing the 3DGAN trainer (docs/performance.md). The pause covers that one import, after
which everything made so far is moved out of the collector's sight (``gc.freeze``: it would
only walk it again); the collector runs as before for what comes after, and the module's
loader is torch's own once it has loaded.
"""

from __future__ import annotations

import gc
import importlib.abc
import sys
from importlib.machinery import ModuleSpec
from types import ModuleType

PAUSED = frozenset({"torch"})
"""Top-level packages imported with the collector paused."""


class _PausedLoader(importlib.abc.Loader):
    """Runs the wrapped loader with the collector off, then hands the module back to it."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader  # what the package sees of itself is its own loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        running = gc.isenabled()
        gc.disable()
        try:
            self.loader.exec_module(module)
            gc.freeze()  # torch's objects stay as long as the process: never walk them again
        finally:
            if running:
                gc.enable()


class _PausingFinder(importlib.abc.MetaPathFinder):
    """Finds :data:`PAUSED` packages through the finders after it and wraps their loader."""

    def find_spec(self, name, path, target=None) -> ModuleSpec | None:
        if name not in PAUSED:
            return None
        later = sys.meta_path[sys.meta_path.index(self) + 1 :]
        for finder in later:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PausedLoader(spec.loader)
                return spec
        return None


def pause_collector_for_torch_import() -> None:
    """Install the pause (once, and only while torch is still to be imported)."""
    if "torch" in sys.modules or any(isinstance(f, _PausingFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _PausingFinder())
