"""Read a CaloChallenge binning XML (``<Bins><Bin ...><Layer id r_edges n_bin_alpha/>``) into a
:class:`CylindricalBinning`, with the standard library's parser; every flaw is one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from evogan.detectors.geometry import CylindricalBinning, LayerBins
from evogan.errors import ConfigError


def read_binning_xml(path: str | Path) -> CylindricalBinning:
    """The layers of the first ``<Bin>`` of ``path``, in ``id`` order (ids 0..L-1 each once)."""
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise ConfigError(f"binning file {path} does not exist") from None
    except (ET.ParseError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"binning file {path} is not readable XML ({exc})") from None
    bins = root.find("Bin") if root.tag != "Bin" else root
    layers = [] if bins is None else bins.findall("Layer")
    if not layers:
        raise ConfigError(f"binning file {path} has no <Bin> with <Layer> elements")
    found: dict[int, LayerBins] = {}
    for element in layers:
        index, layer = _layer(path, element)
        if index in found:
            raise ConfigError(f"binning file {path}: layer id {index} appears twice")
        found[index] = layer
    if sorted(found) != list(range(len(found))):
        raise ConfigError(
            f"binning file {path}: layer ids must be 0..{len(found) - 1}, got {sorted(found)}"
        )
    try:
        return CylindricalBinning(tuple(found[i] for i in range(len(found))))
    except ConfigError as exc:
        raise ConfigError(f"binning file {path}: {exc}") from None


def _layer(path: Path, element: ET.Element) -> tuple[int, LayerBins]:
    attrib = element.attrib
    try:
        index = int(attrib["id"])
        edges = tuple(float(value) for value in attrib["r_edges"].split(","))
        alpha = int(attrib.get("n_bin_alpha", "1"))
    except KeyError as exc:
        raise ConfigError(f"binning file {path}: a <Layer> lacks the {exc} attribute") from None
    except ValueError:
        raise ConfigError(
            f"binning file {path}: layer {attrib.get('id')!r} has a value that is not a number "
            f"(r_edges={attrib.get('r_edges')!r}, n_bin_alpha={attrib.get('n_bin_alpha')!r})"
        ) from None
    if any(edge < 0 for edge in edges):
        raise ConfigError(f"binning file {path}: layer {index} has negative r_edges {list(edges)}")
    return index, LayerBins(edges, alpha)
