"""Loading YAML configs into typed objects, with ``--set key=value`` overrides.

Every error becomes one line that names the key, the bad value and what is allowed, so a
user on a batch system sees the fix in the job log without reading a traceback.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from evogan.errors import ConfigError

ModelT = TypeVar("ModelT", bound=BaseModel)


class StrictModel(BaseModel):
    """Base of every config section: unknown keys and silent type coercion are errors, and so
    is a float setting of ``inf`` or ``nan``: no setting means infinity, and either one would
    train to NaN or fail later in arithmetic instead of at load."""

    model_config = ConfigDict(
        extra="forbid", strict=False, validate_assignment=True, allow_inf_nan=False
    )

    renamed_keys: ClassVar[dict[str, str]] = {}
    """Keys the section no longer takes -> the key of the section that replaced each (the
    refusal of an old key names its new one)."""


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, turning every failure into a one-line ConfigError."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory; pass a YAML file inside it")
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass e.g. configs/smoke.yaml")
    try:
        raw = yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8 YAML"
        ) from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"config file {path} is not valid YAML{where}; fix the syntax") from None
    if raw is None:
        raise ConfigError(f"config file {path} is empty; start from one in configs/")
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise ConfigError(f"config file {path} must hold a mapping of keys, got a {kind}")
    return raw


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides; values parse as YAML (``0.05``, ``[1, 2]``, ``true``)."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like key.subkey=value")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        node = raw
        parts = key.strip().split(".")
        for depth, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                dotted = ".".join(parts[: depth + 1])
                raise ConfigError(f"override {item!r}: {dotted} is a value, not a section")
            node = child
        node[parts[-1]] = value
    return raw


def validate(model: type[ModelT], raw: dict[str, Any], source: str = "config") -> ModelT:
    """Validate ``raw`` against ``model``; the first problem becomes a one-line ConfigError."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(model, exc)}") from None


def _describe(model: type[BaseModel], exc: ValidationError) -> str:
    errors = exc.errors()
    first = errors[0]
    loc = [str(part) for part in first["loc"]]
    key = ".".join(loc) or "(top level)"
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    if first["type"] == "extra_forbidden":
        section = _section_at(model, loc[:-1])
        allowed = list(section.model_fields) if section is not None else []
        renamed = getattr(section, "renamed_keys", {}).get(loc[-1])
        close = [renamed] if renamed else difflib.get_close_matches(loc[-1], allowed, n=1)
        new = ".".join([*loc[:-1], close[0]]) if close else ""
        hint = f"it is now {new}; " if renamed else f"did you mean {new}? " if close else ""
        return f"unknown key {key}; {hint}allowed here: {', '.join(sorted(allowed))}{more}"
    if first["type"] == "missing":
        return f"missing key {key}; add it to the config{more}"
    value = first.get("input")
    message = first["msg"]
    if first["type"] == "finite_number":
        message = "it must be a finite number (no setting takes inf or nan)"
    ctx = first.get("ctx") or {}
    if "expected" in ctx and "expected" not in message:
        message = f"{message} (allowed: {ctx['expected']})"
    if first["type"] == "list_type" and not isinstance(value, dict):
        item = yaml.safe_dump(value, default_flow_style=True).removesuffix("\n...\n").strip()
        message = f"{message}; give a list: [{item}] (on the command line --set '{key}=[{item}]')"
    return f"{key} = {value!r} is not allowed: {message}{more}"


def _section_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """The config section at ``loc`` (list indices are skipped), None where it is no section."""
    current: Any = model
    for part in loc:
        if part.isdigit():
            continue
        field = current.model_fields.get(part) if isinstance(current, type) else None
        if field is None:
            return None
        current = _section_type(field.annotation)
        if current is None:
            return None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _section_type(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _section_type(arg)
        if found is not None:
            return found
    return None


def dump(config: BaseModel) -> str:
    """The resolved config as YAML, written into every run directory."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
