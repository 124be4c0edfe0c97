"""Package names imported on first use (PEP 562), so importing a package does not import what
its names need (torch, h5py, MPI) until a caller asks for one of them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_names(package: str, modules: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``modules`` maps each exported name to the
    module that defines it (``.name`` relative to ``package``); a name is imported once."""

    def attribute(name: str) -> Any:
        if name not in modules:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(modules[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    return attribute
