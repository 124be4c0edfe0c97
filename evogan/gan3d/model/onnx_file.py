"""A generator as an ONNX file for ONNX Runtime (``evogan export --format onnx``).

The graph is :class:`~evogan.gan3d.model.shower_graph.ShowerGraph` (the generator with the
latent vector before it and the cell transform and file layout after it), exported by
``torch.onnx.export`` with ``dynamo=True`` (torch.export; the TorchScript exporter is
deprecated) at opset :data:`OPSET`, float32, with a dynamic batch axis ``N``. The file is one
self-contained ``.onnx`` (weights inside) whose ``metadata_props`` say what it is
(:func:`metadata`), written atomically: a temporary file moved into place when complete.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from evogan import __version__
from evogan.errors import EvoganError
from evogan.gan3d.model.networks import Generator
from evogan.gan3d.model.shower_graph import (
    OUTPUT,
    ShowerGraph,
    file_form,
    graph_inputs,
    output_shape,
)
from evogan.gan3d.model.spec import GanSpec
from evogan.store.atomic import atomic_path

OPSET = 18
"""ONNX opset of the exported graph: run by ONNX Runtime 1.14 (2023) and newer."""
INSTALL = 'pip install "evogan[onnx]"'
EXPORT_BATCH = 2
"""Showers in the example batch the graph is traced with (any batch runs the file)."""


def require_onnx() -> None:
    """Refuse in one line when the ONNX packages the exporter needs are missing."""
    missing = []
    for name in ("onnx", "onnxscript"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise EvoganError(
            f"ONNX export needs the {' and '.join(missing)} package(s), not installed here; "
            f"{INSTALL}"
        )


def metadata(spec: GanSpec, about: Mapping[str, Any]) -> dict[str, str]:
    """The file's ``metadata_props``: the evogan version, the spec (JSON), its detector, the
    inputs and output (JSON: names, shapes, units, meaning) and ``about`` (the model picked,
    its source, score, ...; values other than strings as JSON)."""
    form = file_form(spec)
    layout = (
        "one row of voxels per shower, radial bin fastest, then angular bin, then layer "
        "(CaloChallenge)"
        if form.flat
        else "(x, y, layer) cells per shower"
    )
    output = {"name": OUTPUT, "dtype": "float32", "shape": list(output_shape(spec))}
    output.update(unit=form.unit, layout=layout, meaning="visible energy per cell")
    record = {
        "evogan_version": __version__,
        "spec_name": spec.name,
        "detector": spec.detector or "",
        "energy_unit": form.unit,
        "spec": json.dumps(spec.model_dump(mode="json")),
        "inputs": json.dumps([i.as_dict() for i in graph_inputs(spec)]),
        "output": json.dumps(output),
    }
    for key, value in about.items():
        record[key] = value if isinstance(value, str) else json.dumps(value)
    return record


def export_onnx(
    spec: GanSpec, generator: Generator, path: str | Path, about: Mapping[str, Any] | None = None
) -> Path:
    """Write ``generator`` (run as ``evogan generate`` runs it, float32) as an ONNX file at
    ``path`` with :func:`metadata` of ``about``; nothing appears at ``path`` unless complete."""
    require_onnx()
    import onnx

    inputs = graph_inputs(spec)
    graph = ShowerGraph(spec, generator)
    example = _example(spec, inputs)
    batch = torch.export.Dim("N", min=1)
    rest = tuple({0: batch} for _ in inputs[2:])  # forward(latent, energy, *rest)
    shapes = ({0: batch}, {0: batch}, *((rest,) if rest else ()))
    with _quiet():
        program = torch.onnx.export(
            graph,
            example,
            input_names=[i.name for i in inputs],
            output_names=[OUTPUT],
            dynamic_shapes=shapes,
            opset_version=OPSET,
            dynamo=True,
            verbose=False,
        )
    proto = program.model_proto
    for key, value in metadata(spec, dict(about or {})).items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    proto.doc_string = (
        f"evogan {__version__} 3DGAN generator {spec.name!r}: standard normal latent draws and "
        f"primary energies in {file_form(spec).unit} in, the detector file's voxel array out"
    )
    with atomic_path(path) as tmp:
        onnx.save_model(proto, str(tmp))
    return Path(path)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporter's progress lines (stdout), warnings and log lines (torchvision missing),
    kept from the user: what matters is whether it succeeds."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _example(spec: GanSpec, inputs: list) -> tuple[torch.Tensor, ...]:
    """Inputs to trace the graph with: draws, and energies (angles) in the trained range."""
    rng = torch.Generator().manual_seed(0)
    form = file_form(spec)
    tensors = []
    for entry in inputs:
        if entry.name == "energy":
            tensors.append(torch.full((EXPORT_BATCH,), 100.0 / form.to_gev))
        elif entry.name == "theta":
            tensors.append(torch.full((EXPORT_BATCH,), 1.5))
        else:
            tensors.append(torch.randn((EXPORT_BATCH, *entry.shape[1:]), generator=rng))
    return tuple(tensors)


def read_metadata(path: str | Path) -> dict[str, str]:
    """The ``metadata_props`` of an ONNX file (its weights are not read)."""
    require_onnx()
    import onnx

    model = onnx.load_model(str(path), load_external_data=False)
    return {entry.key: entry.value for entry in model.metadata_props}
