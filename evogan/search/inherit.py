"""Weight inheritance: a child whose layer shapes match its parent's starts from its weights.

The parent's committed checkpoint of each member training is copied into the child's member
run directory with the child's optimiser settings (learning rates, RMSprop alpha and eps: the
genes may have changed them) and the child's config beside it; the data-parallel trainer then
resumes from it as from its own checkpoint and trains the child's budget on top. Nothing about
the parent is trusted blindly: the layer shapes, the rank count and the mode must match, or the
child starts from scratch. ``inherited.json`` in the child's run directory names the parent and
the :func:`network_digest` of every file it started from (its own checkpoint later replaces
them), so where a training's weights came from can be checked.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
import yaml

from evogan.config.base import dump, validate
from evogan.config.gan import Gan3dConfig
from evogan.gan3d.model.spec import GanSpec, discriminator_layers, generator_layers
from evogan.gan3d.training.checkpoint import MARKER
from evogan.store import RunDir, load_weights, save_weights

INHERITED = "inherited.json"


def network_digest(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over the generator and discriminator tensors of a checkpoint file (names and
    values; optimiser state, random stream and batch statistics aside)."""
    digest = hashlib.sha256()
    for name in sorted(k for k in tensors if k.startswith(("generator/", "discriminator/"))):
        digest.update(name.encode())
        digest.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def layer_signature(spec: GanSpec) -> tuple[Any, ...]:
    """Everything that decides the networks' state-dict shapes."""
    layers = [
        (layer.net, layer.name, layer.in_shape, layer.out_shape, layer.kernel)
        for layer in [*generator_layers(spec), *discriminator_layers(spec)]
    ]
    flags = [(b.batch_norm, b.bias) for b in [*spec.generator, *spec.discriminator]]
    return (tuple(layers), tuple(flags), spec.heads.model_dump_json(), spec.latent_size)


def seed_from_parent(parent: Path, child: Path, config: Gan3dConfig, ranks: int) -> int:
    """Copy ``parent``'s checkpoint into the new run directory ``child`` for ``config``;
    returns the parent's trained epochs, or 0 when the parent cannot be inherited from."""
    marker_path = parent / MARKER
    if not marker_path.is_file() or not (parent / "config.yaml").is_file():
        return 0
    stored = yaml.safe_load((parent / "config.yaml").read_text())
    parent_spec = validate(GanSpec, stored["spec"], source=str(parent / "config.yaml"))
    if layer_signature(parent_spec) != layer_signature(config.spec):
        return 0
    run = RunDir(parent)
    marker = run.read_json(MARKER)
    same_mode = stored.get("trainer", {}).get("mode") == config.trainer.mode
    if marker["world_size"] != ranks or not same_mode or stored.get("seed") != config.seed:
        return 0
    spec = config.spec
    settings = {
        "g_optimizer": {"lr": spec.g_lr, "alpha": spec.rmsprop_alpha, "eps": spec.rmsprop_eps},
        "d_optimizer": {"lr": spec.d_lr, "alpha": spec.rmsprop_alpha, "eps": spec.rmsprop_eps},
    }
    target = RunDir(child)
    digests = {}
    for name in marker["files"]:
        tensors, meta = load_weights(parent / name)
        for optimizer, values in settings.items():
            for group in meta["param_groups"][optimizer]:
                group.update({k: v for k, v in values.items() if k in group})
        save_weights(child / name, tensors, {**meta, "inherited_from": str(parent)})
        digests[name] = network_digest(tensors)
    target.write_json(
        INHERITED, {"from": str(parent), "epoch": marker["epoch"], "networks": digests}
    )
    target.write_config(dump(config))
    target.write_json(MARKER, {**marker, "inherited_from": str(parent)})
    return int(marker["epoch"])
