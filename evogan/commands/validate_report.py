"""What ``evogan validate`` prints and writes: the selection score's summary, the CaloChallenge
metric set as a table laid out like the published results (arXiv:2410.21611), so a model's row
can be set beside theirs, and ``score.json`` with its figures."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from evogan.physics.targets import describe_targets, target_summary

if TYPE_CHECKING:
    from evogan.physics import Reference

PUBLISHED_SOURCE = "arXiv:2410.21611 results files, on Geant4 data (not evogan's reference)"
PUBLISHED = {  # AUC low, AUC high, FPD x 10^3 (docs/explanation/validation.md)
    "calochallenge-2": (
        ("Geant4 vs Geant4", 0.50, 0.50, 10.8),
        ("CaloDREAM", 0.531, 0.521, 24.6),
        ("CaloDiffusion", 0.577, 0.591, 147.0),
        ("L2LFlows (conv.)", 0.708, 0.737, 157.0),
        ("iCaloFlow", 0.763, 0.837, 377.0),
        ("MDMA (GAN)", 0.942, 0.987, 865.0),
        ("DeepTree (GAN)", 0.963, 0.927, 293.0),
    ),
    "calochallenge-3": (
        ("Geant4 vs Geant4", 0.50, 0.50, 8.8),
        ("CaloDREAM", 0.630, 0.524, 20.7),
        ("CaloDiffusion", 0.561, 0.607, 71.2),
        ("MDMA (GAN)", 0.944, 0.987, 589.0),
    ),
}
COLUMNS = (  # metric, heading, factor (the challenge quotes FPD and KPD x 10^3)
    ("AUC_low", "AUC low", 1.0),
    ("AUC_high", "AUC high", 1.0),
    ("JSD_low", "JSD low", 1.0),
    ("JSD_high", "JSD high", 1.0),
    ("FPD", "FPD x10^3", 1e3),
    ("KPD", "KPD x10^3", 1e3),
)
NAME_WIDTH = 22
CELL_WIDTH = 17


def print_summary(report: dict) -> None:
    """The selection score beside its floor, the metrics, the worst features, the ensemble
    line, the CaloChallenge headline (when computed) and the files written."""
    floor = report["floor"]
    metrics = report.get("metrics", {})
    line = f"score {report['score']:.3f} (floor {floor['score']:.3f} +- {floor['spread']:.3f})"
    parts = [f"{k} {v['value']:.3g} +- {v['error']:.2g}" for k, v in metrics.items()]
    print(line)
    if parts:
        whose = f"{Path(report['generated']).name}: " if "ensemble" in report else ""
        print(f"  {whose}" + ", ".join(parts))
    worst = report.get("worst_features") or []
    if worst:
        print(
            "  worst features: " + ", ".join(f"{w['feature']} {w['separation']:.2f}" for w in worst)
        )
    if "targets" in report:
        print("  " + describe_targets(target_summary(report["targets"])))
    if "ensemble" in report:
        ens = report["ensemble"]
        print(
            f"  ensemble of {ens['members']}: members {ens['score_mean']:.3f} +- "
            f"{ens['score_std']:.3f}, score = mean + {ens['beta']:g} x std = {ens['score']:.3f}"
        )
    if "calochallenge" in report:
        cc = report["calochallenge"]["metrics"]
        shown = [
            f"{heading} {_cell(cc[name], factor).strip()} (floor {cc[name]['floor'] * factor:.3g})"
            for name, heading, factor in COLUMNS
            if name in cc
        ]
        print("  CaloChallenge: " + ", ".join(shown))
    print(f"wrote {', '.join(report['files'])}")


def calochallenge_table(report: dict, label: str) -> str:
    """The metric set as rows of a table: the generated set, the floor (the reference's halves
    against each other), the published models for the challenge's own detectors, then the
    separation power per feature family with its floor."""
    cc = report["calochallenge"]
    metrics = cc["metrics"]
    names = [(name, heading, factor) for name, heading, factor in COLUMNS if name in metrics]
    events = cc["events"]
    lines = [
        f"CaloChallenge metric set, detector {cc['detector']}: {events['generated']} generated "
        f"vs {events['reference']} reference showers",
        f"floor: one half of the reference against the other ({cc['floor_events']} showers each)",
        "",
        "".ljust(NAME_WIDTH) + "".join(heading.rjust(CELL_WIDTH) for _, heading, _ in names),
        label[: NAME_WIDTH - 1].ljust(NAME_WIDTH)
        + "".join(_cell(metrics[name], factor) for name, _, factor in names),
        "floor".ljust(NAME_WIDTH)
        + "".join(
            _cell({"value": metrics[n]["floor"], "error": metrics[n]["floor_error"]}, f)
            for n, _, f in names
        ),
    ]
    published = PUBLISHED.get(cc["detector"])
    if published:
        lines += ["", f"published ({PUBLISHED_SOURCE}):"]
        quoted = {"AUC_low": 1, "AUC_high": 2, "FPD": 3}
        for row in published:
            cells = [
                f"{row[quoted[name]]:.3g}".rjust(CELL_WIDTH)
                if name in quoted
                else "-".rjust(CELL_WIDTH)
                for name, _, _ in names
            ]
            lines.append(row[0].ljust(NAME_WIDTH) + "".join(cells))
    lines += [
        "",
        "separation power".ljust(NAME_WIDTH)
        + "value".rjust(CELL_WIDTH)
        + "floor".rjust(CELL_WIDTH)
        + "  features",
    ]
    for family, entry in cc["separation_groups"].items():
        floor = {"value": entry.get("floor", float("nan")), "error": entry.get("floor_error", 0)}
        lines.append(
            family.ljust(NAME_WIDTH)
            + _cell(entry, 1.0)
            + _cell(floor, 1.0)
            + f"  {entry['features']}"
        )
    return "\n".join(lines)


def _cell(entry: dict, factor: float) -> str:
    value, error = entry["value"] * factor, entry["error"] * factor
    return f" {value:.3g} ± {error:.2g}".rjust(CELL_WIDTH)  # apart even when wider than the cell


def write_report(report: dict, figures: dict | None, out: Path, ref: Reference) -> None:
    """``score.json`` and the figures (features, profiles, the CaloChallenge set; none when
    ``figures`` is None) into ``out``."""
    from evogan.store import atomic_write, to_json

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "score.json"]
    if figures is not None:
        written += _draw(report, figures, out, ref)
    report["files"] = [str(p) for p in written]
    atomic_write(out / "score.json", to_json(report, indent=2) + "\n")


def _draw(report: dict, figures: dict, out: Path, ref: Reference) -> list[Path]:
    """The figures' files, drawn into ``out``."""
    from evogan.physics.ensemble import observables
    from evogan.plots.gan import plot_features, plot_profiles, summary_line

    headline = summary_line(report["score"], report["floor"])
    written = []
    if figures["table"] is not None and (~figures["table"].bad).any():
        written.append(
            plot_features(
                ref.table,
                figures["table"],
                out / "features.png",
                headline=headline,
                label=figures["table_label"],
            )
        )
    challenge = figures.get("calochallenge")
    transverse = None if challenge is None else {**challenge, "label": figures["table_label"]}
    written.append(
        plot_profiles(
            observables(ref.table, ref.edges),
            figures["observables"],
            out / "profiles.png",
            energy_edges=ref.edges,
            headline=headline,
            label=figures["label"],
            generated_std=figures["std"],
            transverse=transverse,
            hit_threshold=10 ** ref.table.spectrum_edges[0],
        )
    )
    if challenge is not None:
        from evogan.commands.validate_calochallenge import calochallenge_figure

        written.append(calochallenge_figure(challenge, out, figures["label"]))
    return written
