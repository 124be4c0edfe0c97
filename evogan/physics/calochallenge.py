"""The CaloChallenge metric set (arXiv:2410.21611; CaloChallenge/homepage ``code/evaluate.py``)
for generated against reference showers of any detector: arrays in, numbers out.

- ``AUC_low``/``JSD_low``: the DNN classifier of :func:`~evogan.physics.classifier.
  network_classifier` on the voxels, as the challenge prepares them (``log10 E_inc`` and every
  voxel as 100 x E_voxel / E_inc);
- ``AUC_high``/``JSD_high``: the same classifier on the high-level features (``log10 E_inc``,
  ``log10 (E_layer + 1e-8)`` with energies in MeV, centres of energy and widths in x and y per
  layer in units of 100 mm), standardised with the training part;
- ``FPD``/``KPD``: jetnet's Frechet and kernel physics distances on those high-level features,
  each divided by the reference's largest absolute value (jetnet's ``normalise``), with
  :mod:`~evogan.physics.frechet` (extrapolated to infinite size; jetnet's error, the fit's)
  and :mod:`~evogan.physics.kernel`;
- ``separation_power``: the triangular discrimination of every high-level feature histogram
  (E_tot/E_inc, energy, centres and widths per layer, the voxel-energy spectrum), binned at the
  reference's quantiles (:mod:`~evogan.physics.separation`), with resampling errors.

Every number comes with its error and its *floor*: the same metric for one half of the reference
against the other (an independent sample of the truth, at half the size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evogan.detectors import Detector
from evogan.detectors.geometry import CylindricalBinning, Geometry
from evogan.physics.classifier import NetworkSetup, network_classifier
from evogan.physics.frechet import fpd_fit
from evogan.physics.kernel import jetnet_scale, kpd
from evogan.physics.layered import SUMS, centre_width, cylinder_sums, relevant_layers
from evogan.physics.profiles import layer_profiles
from evogan.physics.resampling import EventWeights, resampled_error
from evogan.physics.separation import histogram_separation, separation_powers

LOG_OFFSET_MEV = 1e-8  # the challenge's log10(E_layer + 1e-8), E in MeV
MEV_PER_GEV = 1e3
POSITION_UNIT_MM = 100.0  # the challenge divides centres and widths (mm) by 100
SPECTRUM_BINS = 40
SPECTRUM = "voxel_energy"
DEFAULT_SETUP = NetworkSetup()
METRICS = ("AUC_low", "JSD_low", "AUC_high", "JSD_high", "FPD", "KPD")


def high_level_features(
    showers_flat: np.ndarray, incident_gev: np.ndarray, detector: Detector
) -> dict[str, np.ndarray]:
    """The challenge's high-level features per shower, computed from the detector's voxel map:
    ``Etot_Einc``, ``E_layer_{k}`` (GeV) for every layer holding voxels, and for layers binned in
    angle (cylinders) or every layer (Cartesian grids) ``EC_x_{k}``, ``EC_y_{k}`` (centre of
    energy, mm) and ``width_x_{k}``, ``width_y_{k}`` (energy-weighted spread, mm); 0 for an empty
    layer, as in the challenge's ``HighLevelFeatures``."""
    sums = _moment_sums(np.asarray(showers_flat, dtype=np.float64), detector.geometry)
    filled, positional = relevant_layers(detector.geometry)
    e_layer = sums[..., 0]
    features = {
        "Etot_Einc": e_layer.sum(axis=1) / np.asarray(incident_gev, dtype=np.float64).reshape(-1)
    }
    for k in filled:
        features[f"E_layer_{k}"] = e_layer[:, k]
    moments = {"x": 1, "y": 3}
    centres, widths = {}, {}
    for axis, column in moments.items():
        centres[axis], widths[axis] = centre_width(
            sums[..., column], sums[..., column + 1], e_layer
        )
    for name, values in (("EC_x", centres["x"]), ("EC_y", centres["y"])):
        for k in positional:
            features[f"{name}_{k}"] = values[:, k]
    for name, values in (("width_x", widths["x"]), ("width_y", widths["y"])):
        for k in positional:
            features[f"{name}_{k}"] = values[:, k]
    return features


def _moment_sums(flat: np.ndarray, geometry: Geometry) -> np.ndarray:
    """Per-layer moment sums (n, layers, 6) of flat showers in either geometry."""
    if isinstance(geometry, CylindricalBinning):
        return cylinder_sums(flat, geometry)
    vmap = geometry.voxel_map
    onehot = (vmap.layer[:, None] == np.arange(geometry.layers)[None, :]).astype(np.float64)
    weights = [onehot]
    for coord in (vmap.x_mm, vmap.y_mm):
        weights += [onehot * coord[:, None], onehot * coord[:, None] ** 2]
    out = np.empty((len(flat), geometry.layers, SUMS))
    out[..., :5] = (flat @ np.hstack(weights)).reshape(len(flat), 5, geometry.layers).swapaxes(1, 2)
    out[..., 5] = (flat > 0).astype(np.float64) @ onehot
    return out


def classifier_inputs_low(showers_flat: np.ndarray, incident_gev: np.ndarray) -> np.ndarray:
    """The challenge's low-level classifier input: log10 E_inc (MeV), then 100 E_voxel / E_inc."""
    incident = np.asarray(incident_gev, dtype=np.float64).reshape(-1, 1)
    voxels = 100.0 * np.asarray(showers_flat, dtype=np.float64) / incident
    return np.hstack([np.log10(incident * MEV_PER_GEV), voxels])


def classifier_inputs_high(features: dict[str, np.ndarray], incident_gev: np.ndarray) -> np.ndarray:
    """The challenge's high-level input (also FPD's and KPD's): log10 E_inc and log10 of each
    layer energy plus 1e-8 (MeV), centres and widths over 100 mm."""
    incident = np.asarray(incident_gev, dtype=np.float64).reshape(-1)
    columns = [np.log10(incident * MEV_PER_GEV)]
    for prefix in ("E_layer_", "EC_x_", "EC_y_", "width_x_", "width_y_"):
        for name, values in features.items():
            if name.startswith(prefix):
                if prefix == "E_layer_":
                    columns.append(np.log10(values * MEV_PER_GEV + LOG_OFFSET_MEV))
                else:
                    columns.append(values / POSITION_UNIT_MM)
    return np.column_stack(columns)


def spectrum_edges(reference_flat: np.ndarray, bins: int = SPECTRUM_BINS) -> np.ndarray:
    """Log-spaced voxel-energy bins (GeV) from the reference's smallest to largest positive
    voxel energy; a voxel above the last edge or below the first lands in an outer bin."""
    positive = np.asarray(reference_flat)[np.asarray(reference_flat) > 0]
    if positive.size == 0:
        return np.array([1e-12, 1.0])
    low, high = float(positive.min()), float(positive.max())
    return np.geomspace(low, max(high, low * 10), bins + 1)


def spectrum_counts(showers_flat: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per shower, the count of its positive voxels in each bin of ``edges`` plus an underflow
    and an overflow bin: (N, len(edges) + 1)."""
    showers_flat = np.asarray(showers_flat)
    rows, cols = np.nonzero(showers_flat > 0)
    index = np.searchsorted(edges, showers_flat[rows, cols], side="right")
    width = len(edges) + 1
    flat = np.bincount(rows * width + index, minlength=len(showers_flat) * width)
    return flat.reshape(len(showers_flat), width).astype(np.float64)


@dataclass(frozen=True)
class Sample:
    """One side of a comparison: flat showers (GeV), incident energies (GeV), features. A
    non-finite voxel counts as 0, as the community's evaluation scripts replace them."""

    showers: np.ndarray
    incident: np.ndarray
    features: dict[str, np.ndarray]

    @classmethod
    def of(cls, showers_flat: np.ndarray, incident_gev: np.ndarray, detector: Detector) -> Sample:
        showers = np.nan_to_num(np.asarray(showers_flat, dtype=np.float64), posinf=0, neginf=0)
        incident = np.asarray(incident_gev, dtype=np.float64).reshape(-1)
        return cls(showers, incident, high_level_features(showers, incident, detector))

    def take(self, rows: np.ndarray) -> Sample:
        return Sample(
            self.showers[rows], self.incident[rows], {k: v[rows] for k, v in self.features.items()}
        )


def _value(value: float, error: float) -> dict[str, float]:
    return {"value": float(value), "error": float(error)}


def compare(
    reference: Sample,
    generated: Sample,
    seed: int = 0,
    setup: NetworkSetup = DEFAULT_SETUP,
    classifiers: bool = True,
) -> dict:
    """Every metric of the set, generated against reference: ``{"metrics": {name: {value,
    error}}, "separation_power": {feature: {value, error}}, "separation_groups": {family:
    {value, error, features}}}``; the AUCs and JSDs only with ``classifiers`` (the costly
    part)."""
    rng = np.random.default_rng(seed)
    metrics: dict[str, dict[str, float]] = {}
    if classifiers:
        low = [classifier_inputs_low(s.showers, s.incident) for s in (reference, generated)]
        result = network_classifier(*low, seed, setup, standardise=False)
        metrics["AUC_low"] = _value(result.auc, result.auc_error)
        metrics["JSD_low"] = _value(result.jsd, result.jsd_error)
    high = [classifier_inputs_high(s.features, s.incident) for s in (reference, generated)]
    if classifiers:
        result = network_classifier(*high, seed + 1, setup, standardise=True)
        metrics["AUC_high"] = _value(result.auc, result.auc_error)
        metrics["JSD_high"] = _value(result.jsd, result.jsd_error)
    metrics["FPD"] = _value(*fpd_fit(*jetnet_scale(*high), rng))
    metrics["KPD"] = _value(*kpd(*high, rng))
    separation, groups = separation_power(reference, generated, rng)
    return {"metrics": metrics, "separation_power": separation, "separation_groups": groups}


def separation_power(
    reference: Sample, generated: Sample, rng: np.random.Generator
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Separation power per high-level feature and of the voxel-energy spectrum (features
    constant in the reference are skipped), each with its resampling error; and per family of
    features (``E_layer``, ``EC_x``, ... over their layers) and over all (``mean``) the mean
    with its error. One set of replicates serves all, so a mean's error holds the correlations."""
    ref_strata = np.zeros(len(reference.incident), dtype=int)
    gen_strata = np.zeros(len(generated.incident), dtype=int)
    weights = EventWeights.draw(ref_strata, gen_strata, rng)
    sep = separation_powers(
        reference.features, generated.features, ref_strata, gen_strata, 1, weights
    )
    edges = spectrum_edges(reference.showers)
    spectrum, _ = histogram_separation(
        spectrum_counts(reference.showers, edges),
        spectrum_counts(generated.showers, edges),
        ref_strata,
        gen_strata,
        1,
        weights,
    )
    replicates = np.column_stack([sep.overall, spectrum])
    names = [*sep.names, SPECTRUM]
    errors = resampled_error(replicates)
    report = {n: _value(replicates[0, i], errors[i]) for i, n in enumerate(names)}
    families: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        families.setdefault(feature_family(name), []).append(i)
    families["mean"] = list(range(len(names)))
    groups = {}
    for family, columns in families.items():
        means = replicates[:, columns].mean(axis=1)
        groups[family] = {**_value(means[0], resampled_error(means)), "features": len(columns)}
    return report, groups


def feature_family(name: str) -> str:
    """``E_layer_12`` -> ``E_layer``; a name without a layer number is its own family."""
    stem, _, last = name.rpartition("_")
    return stem if stem and last.isdigit() else name


def calochallenge_metrics(
    gen_flat: np.ndarray,
    gen_incident_gev: np.ndarray,
    ref_flat: np.ndarray,
    ref_incident_gev: np.ndarray,
    detector: Detector,
    seed: int = 0,
    setup: NetworkSetup = DEFAULT_SETUP,
    classifiers: bool = True,
) -> dict:
    """The challenge's metric set of generated against reference flat showers (N, voxels) in GeV
    with incident energies in GeV, each metric with its error and its floor (the reference's two
    halves compared alike): the report ``evogan validate`` prints and writes."""
    for what, flat in (("generated", gen_flat), ("reference", ref_flat)):
        if np.asarray(flat).ndim != 2 or np.asarray(flat).shape[1] != detector.voxels:
            raise ValueError(
                f"{what} showers must be flat (N, {detector.voxels}) for {detector.name}, got "
                f"{np.asarray(flat).shape}"
            )
    reference = Sample.of(ref_flat, ref_incident_gev, detector)
    generated = Sample.of(gen_flat, gen_incident_gev, detector)
    result = compare(reference, generated, seed, setup, classifiers)
    order = np.random.default_rng(seed + 2).permutation(len(reference.incident))
    half = len(order) // 2
    floor = compare(
        reference.take(order[:half]), reference.take(order[half:]), seed + 3, setup, classifiers
    )
    for key in ("metrics", "separation_power", "separation_groups"):
        for name, entry in result[key].items():
            below = floor[key].get(name)
            if below is not None:
                entry["floor"], entry["floor_error"] = below["value"], below["error"]
    return {
        "detector": detector.name,
        "events": {"generated": len(generated.incident), "reference": len(reference.incident)},
        "floor_events": half,
        **result,
    }


def figure_data(
    showers_flat: np.ndarray, incident_gev: np.ndarray, detector: Detector
) -> dict[str, np.ndarray]:
    """Plain arrays the challenge's kind of figures draw for one sample: ``layer_profiles``, the
    per-layer mean and standard error of EC_x, EC_y, width_x and width_y over showers with energy
    in that layer (``{name}_layers`` gives the layer numbers), ``Etot_Einc`` per shower and the
    positive voxel energies (GeV)."""
    sample = Sample.of(showers_flat, incident_gev, detector)
    data = layer_profiles(sample.showers, detector)
    data["Etot_Einc"] = sample.features["Etot_Einc"]
    data["voxel_energies"] = sample.showers[sample.showers > 0]
    data["incident"] = sample.incident
    for family in ("EC_x", "EC_y", "width_x", "width_y"):
        layers, means, errors = [], [], []
        for name, values in sample.features.items():
            if feature_family(name) != family:
                continue
            layer = int(name.rpartition("_")[2])
            filled = values[sample.features[f"E_layer_{layer}"] > 0]
            layers.append(layer)
            means.append(filled.mean() if filled.size else np.nan)
            errors.append(filled.std(ddof=1) / np.sqrt(filled.size) if filled.size > 1 else np.nan)
        data[f"{family}_layers"] = np.asarray(layers, dtype=int)
        data[f"{family}_mean"] = np.asarray(means)
        data[f"{family}_error"] = np.asarray(errors)
    return data
