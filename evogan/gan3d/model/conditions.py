"""The conditions a generator was trained on: the range of primary energies and incidence
angles of its training showers, recorded in every generator file it saves.

A conditional GAN is only trusted inside those ranges, so ``evogan generate`` draws from them
by default and ``evogan generate`` and ``evogan validate`` say when they ask a generator for
showers outside them (extrapolation) instead of staying silent. Files written before this was
recorded carry no ranges and get no notes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from evogan.distributed.mpi import MPI

KEY = "trained_on"
# A range's ends may pass the training range by this fraction of its span before a note: the
# training range is the extreme showers drawn, the nominal range of the data set a little wider.
TOLERANCE = 0.05


def trained_ranges(energy: np.ndarray, theta: np.ndarray, world: MPI.Comm) -> dict[str, list]:
    """``{"energy_gev": [lo, hi], "theta_deg": [lo, hi]}`` over every rank's training showers
    (collective); ``theta`` in radians as the reader gives it (pi/2 where files store none)."""
    ranges = {}
    for key, values in (("energy_gev", energy), ("theta_deg", np.degrees(theta))):
        lo = float(values.min()) if len(values) else math.inf
        hi = float(values.max()) if len(values) else -math.inf
        lo, hi = world.allreduce(lo, op=MPI.MIN), world.allreduce(hi, op=MPI.MAX)
        ranges[key] = [round(lo, 4), round(hi, 4)]
    return ranges


def recorded(meta: Mapping[str, Any], key: str) -> tuple[float, float] | None:
    """The training range ``key`` (``energy_gev`` or ``theta_deg``) a generator file records."""
    found = meta.get(KEY, {}).get(key)
    return None if found is None else (float(found[0]), float(found[1]))


def outside(meta: Mapping[str, Any], key: str, asked: tuple[float, float], what: str) -> list[str]:
    """A note when ``asked`` (lo, hi; ``what`` names it, plural) reaches beyond the recorded
    training range ``key`` by more than ``TOLERANCE`` of its span; none when it stays inside or
    nothing is recorded."""
    trained = recorded(meta, key)
    if trained is None:
        return []
    lo, hi = trained
    slack = TOLERANCE * (hi - lo)
    if asked[0] >= lo - slack and asked[1] <= hi + slack:
        return []
    unit = "GeV" if key == "energy_gev" else "degrees"
    return [
        f"{what} span {_span(*asked)} {unit}, beyond the {_span(lo, hi)} {unit} this generator "
        "was trained on: showers outside that range are extrapolations"
    ]


def _span(lo: float, hi: float) -> str:
    return f"{lo:.4g}" if lo == hi else f"{lo:.4g}-{hi:.4g}"


def beyond_training(
    meta: Mapping[str, Any], energy: np.ndarray, theta: np.ndarray | None, owner: str
) -> list[str]:
    """Notes where showers' primary energies (GeV) and angles (radians; None for generators
    without angle conditioning) reach beyond the ranges ``meta`` records; ``owner`` names
    whose showers they are ("the reference's")."""
    notes = outside(meta, "energy_gev", _extent(energy), f"{owner} primary energies")
    if theta is not None:
        notes += outside(meta, "theta_deg", _extent(np.degrees(theta)), f"{owner} angles")
    return notes


def _extent(values: np.ndarray) -> tuple[float, float]:
    return float(values.min()), float(values.max())
