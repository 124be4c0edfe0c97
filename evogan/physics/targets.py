"""The learning target: four per-bin means of generated showers against tolerances.

The selection score (:mod:`evogan.physics.score`) weighs whole distributions of every feature;
these four means are what a physicist reads first and what the learning target of the small
3DGAN is stated in (docs/tutorials/gan.md, section 6). Per equal-count energy bin of the reference:
the sampling fraction (E_sum / E_primary) within 10%, the longitudinal centre of gravity
within 1 layer, the transverse width (mean of the x and y energy-weighted widths) within 20%,
the hits above 3e-4 GeV within 25%. Training reports them at every validation next to the
score, so a reader sees when the two rank generators differently.
"""

from __future__ import annotations

import numpy as np

from evogan.physics.features import FeatureTable
from evogan.physics.score import energy_bin

TOLERANCES = {
    "sampling_fraction": ("relative", 0.10),
    "centre_z_layer": ("absolute", 1.0),
    "width_mm": ("relative", 0.20),
    "hits": ("relative", 0.25),
}
"""Quantity -> (deviation kind, tolerance): relative deviations are fractions of the reference
mean, absolute ones in the quantity's unit (layers)."""


def target_values(table: FeatureTable) -> dict[str, np.ndarray]:
    """The four target quantities of every event of ``table``."""
    scalars = table.scalars
    return {
        "sampling_fraction": scalars["energy_ratio"],
        "centre_z_layer": scalars["centre_z_layer"],
        "width_mm": 0.5 * (scalars["width_x_mm"] + scalars["width_y_mm"]),
        "hits": scalars["hits"].astype(np.float64),
    }


def binned_means(table: FeatureTable, edges: np.ndarray) -> dict[str, list[tuple[float, float]]]:
    """Per energy bin: mean and standard error of each target quantity (NaN for an empty
    bin)."""
    which = energy_bin(table.energy, edges)
    out: dict[str, list[tuple[float, float]]] = {}
    for name, column in target_values(table).items():
        out[name] = []
        for b in range(edges.size - 1):
            chosen = column[which == b]
            mean = float(chosen.mean()) if chosen.size else float("nan")
            error = chosen.std(ddof=1) / np.sqrt(chosen.size) if chosen.size > 1 else np.nan
            out[name].append((mean, float(error)))
    return out


def compare_targets(
    generated: FeatureTable,
    reference: FeatureTable,
    edges: np.ndarray,
    tolerances: dict[str, float] | None = None,
) -> list[dict]:
    """One row per (quantity, bin): both means with their errors, the deviation and whether
    it is within tolerance (an empty generated bin is not); ``tolerances`` replaces the
    default tolerance of the quantities it names (a stricter target, in the same kind)."""
    gen_means, ref_means = binned_means(generated, edges), binned_means(reference, edges)
    rows = []
    for name, (kind, default) in TOLERANCES.items():
        tolerance = (tolerances or {}).get(name, default)
        pairs = zip(gen_means[name], ref_means[name], strict=True)
        for b, ((gen, gen_err), (ref, ref_err)) in enumerate(pairs):
            deviation = gen - ref if kind == "absolute" else (gen - ref) / ref
            rows.append(
                {
                    "quantity": name,
                    "bin": b,
                    "generated": gen,
                    "generated_error": gen_err,
                    "reference": ref,
                    "reference_error": ref_err,
                    "deviation": float(deviation),
                    "tolerance": tolerance,
                    "kind": kind,
                    "within": bool(abs(deviation) <= tolerance),
                }
            )
    return rows


def format_deviation(row: dict) -> str:
    """``-12.0%`` for a relative row, ``+0.44 layers`` for the centre of gravity."""
    if row["kind"] == "absolute":
        return f"{row['deviation']:+.2f} layers"
    return f"{100 * row['deviation']:+.1f}%"


def target_summary(rows: list[dict]) -> dict:
    """Cells within tolerance, of how many, and each miss as ``quantity bin B: deviation``."""
    misses = [
        f"{r['quantity']} bin {r['bin']}: {format_deviation(r)}" for r in rows if not r["within"]
    ]
    return {"within": len(rows) - len(misses), "cells": len(rows), "misses": misses}


def describe_targets(summary: dict, shown: int = 3) -> str:
    """``learning targets 15/16 within tolerance (missed: sampling_fraction bin 0: -12.0%)``."""
    line = f"learning targets {summary['within']}/{summary['cells']} within tolerance"
    misses = summary["misses"]
    if not misses:
        return line
    more = f", {len(misses) - shown} more" if len(misses) > shown else ""
    return f"{line} (missed: {'; '.join(misses[:shown])}{more})"
