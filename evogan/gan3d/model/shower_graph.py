"""A generator with everything ``evogan generate`` does around it, as one module to export:
standard-normal draws and primary energies in the detector file's unit in, the detector file's
voxel array out.

:func:`evogan.gan3d.model.generate.generate_showers` builds the latent vector from the energy
(and angle), runs the generator in eval mode, adds the per-cell noise of ``noise: true`` blocks
from its random stream and undoes the cell transform; the shower writer then converts GeV to the
file's unit and (CaloChallenge) flattens the grid. :class:`ShowerGraph` does the same with the
random draws as inputs, so a C++ framework draws them itself (:func:`graph_inputs` names and
describes every input). The graph holds the generator's own layers (each block's phase form
where it has one), not the C kernel of the inference form ``generate`` runs on a CPU
(:mod:`evogan.gan3d.model.inference`), which is no ONNX operator: ONNX Runtime runs its own
kernels on it, to float32 rounding of ``generate``'s showers.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from evogan.detectors import detector_for
from evogan.gan3d.kernels import set_convolution
from evogan.gan3d.model.blocks import NoiseInjection
from evogan.gan3d.model.networks import Generator, latent_vector, to_gev
from evogan.gan3d.model.spec import GanSpec, generator_layers

OUTPUT = "showers"


@dataclass(frozen=True)
class GraphInput:
    """One input of the exported graph: its name, shape (``N`` is the batch), unit and what to
    feed it."""

    name: str
    shape: tuple[int | str, ...]
    unit: str
    meaning: str

    def as_dict(self) -> dict:
        return {**asdict(self), "dtype": "float32", "shape": list(self.shape)}


@dataclass(frozen=True)
class FileForm:
    """How a detector's files hold showers: the energy unit (``to_gev``: its size in GeV) and
    whether a shower is one flat row of voxels (CaloChallenge) or the (X, Y, Z) grid."""

    unit: str
    to_gev: float
    flat: bool
    voxels: int


def file_form(spec: GanSpec) -> FileForm:
    """The file form of the spec's detector (a window without one: a GeV grid, as ``evogan
    generate`` writes it)."""
    cells = math.prod(spec.output_shape)
    if spec.detector is None:
        return FileForm("GeV", 1.0, False, cells)
    detector = detector_for(spec.detector)
    flat = detector.geometry.kind == "cylindrical"
    return FileForm(detector.file_unit, detector.to_gev, flat, cells)


def graph_inputs(spec: GanSpec) -> list[GraphInput]:
    """The exported graph's inputs in order: the latent draw, the energy, the angle (angle-
    conditioned specs) and one per-cell draw per ``noise: true`` generator block."""
    unit = file_form(spec).unit
    inputs = [
        GraphInput(
            "latent",
            ("N", spec.noise_size),
            "",
            "independent standard normal draws (mean 0, variance 1), one row per shower",
        ),
        GraphInput("energy", ("N",), unit, f"primary energy per shower, in {unit}"),
    ]
    if spec.conditioning.angle:
        inputs.append(GraphInput("theta", ("N",), "rad", "polar angle of incidence per shower"))
    layers = generator_layers(spec)[1:]
    for index, (block, layer) in enumerate(zip(spec.generator, layers, strict=True), start=1):
        if getattr(block, "noise", False):
            shape = ("N", 1, *layer.out_shape[1:])
            what = f"independent standard normal draws per cell of generator block {index}"
            inputs.append(GraphInput(f"cell_noise_{index}", shape, "", what))
    return inputs


def output_shape(spec: GanSpec) -> tuple[int | str, ...]:
    """The exported graph's output shape: the detector file's voxel array of ``N`` showers."""
    form = file_form(spec)
    return ("N", form.voxels) if form.flat else ("N", *spec.output_shape)


class ShowerGraph(nn.Module):
    """A copy of ``generator`` (eval mode, its batch-norm averages) between the graph inputs of
    :func:`graph_inputs` and the detector file's voxel array: cells in the file's unit, for a
    cylinder flat in the CaloChallenge order (radial bin fastest, then angle, then layer)."""

    def __init__(self, spec: GanSpec, generator: Generator) -> None:
        super().__init__()
        self.spec = spec
        self.generator = copy.deepcopy(generator).eval()
        set_convolution(self.generator, "direct")  # the FFT form is a custom operator
        self.form = file_form(spec)

    def forward(
        self, latent: torch.Tensor, energy: torch.Tensor, *rest: torch.Tensor
    ) -> torch.Tensor:
        spec = self.spec
        theta, cell_noise = (rest[0], rest[1:]) if spec.conditioning.angle else (None, rest)
        form = self.form
        gev = energy * form.to_gev if form.to_gev != 1 else energy
        x = latent_vector(spec, latent, gev, theta)
        x = self.generator.dense(x).view(-1, *self.generator.seed_shape)
        draws = iter(cell_noise)
        for block in self.generator.blocks:
            x = block.convolve(x)
            for layer in block.tail:
                if isinstance(layer, NoiseInjection):
                    x = x + layer.scale.view(1, -1, 1, 1, 1) * next(draws)
                else:
                    x = layer(x)
        cells = to_gev(spec, x)
        if form.to_gev != 1:
            cells = cells * (1.0 / form.to_gev)
        if form.flat:  # (N, radial, angular, layer) -> rows in the file's order
            cells = cells.permute(0, 3, 2, 1).reshape(-1, form.voxels)
        return cells


def describe_inputs(spec: GanSpec) -> str:
    """The graph's inputs and output in one phrase: ``latent [N, 15], energy [N] MeV ->
    showers [N, 6480] MeV``."""

    def one(name: str, shape: tuple, unit: str) -> str:
        return f"{name} [{', '.join(map(str, shape))}]" + (f" {unit}" if unit else "")

    unit = file_form(spec).unit
    inputs = ", ".join(one(i.name, i.shape, i.unit) for i in graph_inputs(spec))
    return f"{inputs} -> {one(OUTPUT, output_shape(spec), unit)}"
