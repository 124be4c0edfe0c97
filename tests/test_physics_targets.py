"""The learning target's four per-bin means: an independent sample passes every cell, and each
known distortion misses in the quantity it damages (and only where the damage is large)."""

from __future__ import annotations

import numpy as np
import pytest

from evogan.config.data import DataConfig
from evogan.data.synthetic import synthesize
from evogan.physics import Reference, shower_features
from evogan.physics.distortions import blurred, empty, scaled, shifted
from evogan.physics.targets import TOLERANCES, compare_targets, describe_targets, target_summary

EVENTS = 300
BINS = 4
THRESHOLD = DataConfig().cell_threshold  # as the data are read


def _sample(seed: int) -> tuple[np.ndarray, np.ndarray]:
    parts = list(synthesize(EVENTS, (10.0, 100.0), seed))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


@pytest.fixture(scope="module")
def world() -> dict:
    ref_ecal, ref_energy = _sample(21)
    reference = Reference.from_showers(ref_ecal, ref_energy, cell_threshold=THRESHOLD, bins=BINS)
    return {"reference": reference, "sample": _sample(22)}


def _rows(world: dict, distortion=None) -> list[dict]:
    ecal, energy = world["sample"]
    if distortion is not None:
        ecal = distortion(ecal, energy, np.random.default_rng(3))
    reference = world["reference"]
    table = shower_features(ecal, energy, cell_threshold=THRESHOLD)
    return compare_targets(table, reference.table, reference.edges)


def _missed(rows: list[dict]) -> dict[str, int]:
    """Quantity -> bins out of tolerance."""
    missed = [r["quantity"] for r in rows if not r["within"]]
    return {name: missed.count(name) for name in TOLERANCES}


def test_an_independent_sample_meets_every_cell(world: dict) -> None:
    rows = _rows(world)
    assert len(rows) == len(TOLERANCES) * BINS
    assert target_summary(rows) == {"within": 16, "cells": 16, "misses": []}
    assert describe_targets(target_summary(rows)) == "learning targets 16/16 within tolerance"
    fraction = [r for r in rows if r["quantity"] == "sampling_fraction"]
    assert all(abs(r["deviation"]) < 0.03 and r["generated_error"] > 0 for r in fraction)


def test_each_distortion_misses_in_the_quantity_it_damages(world: dict) -> None:
    assert _missed(_rows(world, scaled(1.05)))["sampling_fraction"] == 0
    too_much = _rows(world, scaled(1.2))
    assert _missed(too_much)["sampling_fraction"] == BINS
    assert _missed(too_much)["centre_z_layer"] == 0 and _missed(too_much)["width_mm"] == 0
    plain = _rows(world)
    fraction = [(r["deviation"], p["deviation"]) for r, p in zip(too_much, plain, strict=True)]
    fraction = np.array(fraction[:BINS])  # the sampling-fraction rows come first
    assert np.allclose(1 + fraction[:, 0], 1.2 * (1 + fraction[:, 1]), rtol=1e-5)
    deeper = _missed(_rows(world, shifted(3, 2)))
    assert deeper["centre_z_layer"] == BINS and deeper["width_mm"] == 0
    assert _missed(_rows(world, blurred(2.0)))["width_mm"] == BINS


def test_empty_showers_miss_every_cell_and_are_named(world: dict) -> None:
    summary = target_summary(_rows(world, empty()))
    assert summary["within"] == 0 and len(summary["misses"]) == 16
    assert summary["misses"][0] == "sampling_fraction bin 0: -100.0%"
    line = describe_targets(summary)
    assert line.startswith("learning targets 0/16 within tolerance (missed: sampling_fraction")
    assert line.endswith(", 13 more)")
