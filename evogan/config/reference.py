"""Every key of every task's config, read from the config models: its dotted path, type,
default, allowed values and description. The docs site's config reference is rendered from
these at build time (``docs/hooks/reference.py``), so it cannot drift from the code."""

from __future__ import annotations

import inspect
import re
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from evogan.config import TASKS, task_config

__all__ = ["Key", "config_keys", "config_markdown"]

BOUNDS = ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"), (at.Le, "le", "<="))
ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")


@dataclass(frozen=True)
class Key:
    """One config key: ``path`` is dotted from the top of the file (``[]``: every item of a
    list); ``section`` is the model a section key holds (None for a value)."""

    path: str
    type: str
    default: str
    allowed: str
    description: str
    section: type[BaseModel] | None = None


def config_keys(model: type[BaseModel], defaults: BaseModel | None = None) -> list[Key]:
    """Every key of ``model`` and its sections, depth first, with the defaults of ``defaults``
    (a section's own default, e.g. the search GA's migration) where given."""
    keys: list[Key] = []
    for name, field in model.model_fields.items():
        section, many = _section(field.annotation)
        default = _default(field, defaults, name)
        kind, allowed = _type(field.annotation, field.metadata)
        shown = "" if isinstance(default, BaseModel) else _value(default)
        keys.append(Key(name, kind, shown, allowed, field.description or "", section))
        if section is None:
            continue
        inner = default if isinstance(default, section) else None
        prefix = f"{name}[]." if many else f"{name}."
        keys += [_within(prefix, key) for key in config_keys(section, inner)]
    return keys


def _within(prefix: str, key: Key) -> Key:
    return Key(prefix + key.path, key.type, key.default, key.allowed, key.description, key.section)


def _section(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (directly, in a union with None, or as list items) and whether
    it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        inner, _ = _section(args[0])
        return inner, inner is not None
    if origin in (Union, types.UnionType):
        for arg in args:
            inner, many = _section(arg)
            if inner is not None:
                return inner, many
    return None, False


def _default(field: FieldInfo, defaults: BaseModel | None, name: str) -> Any:
    if defaults is not None:
        return getattr(defaults, name)
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def _type(annotation: Any, outer: Any = ()) -> tuple[str, str]:
    """The type of a value in words and what it may be (bounds, choices), e.g. ``("int", "> 0")``;
    ``outer``: the field's own constraints, which hold for the value (not for ``None``)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0], (*args[1:], *outer))
    if origin in (Union, types.UnionType):
        parts = [_type(arg, () if arg is type(None) else outer) for arg in args]
        kinds = list(dict.fromkeys(kind for kind, _ in parts))
        allowed = " or ".join(allowed or kind for kind, allowed in parts)
        return " or ".join(kinds), allowed if any(a for _, a in parts) else ""
    kind, allowed = _value_type(annotation, origin, args)
    return kind, _join(allowed, _constraints(outer))


def _value_type(annotation: Any, origin: Any, args: tuple[Any, ...]) -> tuple[str, str]:
    if origin is Literal:
        return type(args[0]).__name__, ", ".join(f"`{_plain(arg)}`" for arg in args)
    if origin is list:
        kind, allowed = _type(args[0])
        each = allowed if allowed.startswith("each ") else f"each {allowed}"
        return f"list of {kind}", each if allowed else ""
    if origin is tuple:
        parts = [_type(arg) for arg in args]
        allowed = {a for _, a in parts}
        each = f"each {allowed.pop()}" if len(allowed) == 1 and "" not in allowed else ""
        return "[" + ", ".join(kind for kind, _ in parts) + "]", each
    if annotation is type(None):
        return "null", ""
    if annotation is Any:
        return "any", ""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section", ""
    if isinstance(annotation, type):
        return annotation.__name__, ""
    raise TypeError(f"config reference: no words for the type {annotation!r}; teach _type")


def _constraints(metadata: Any) -> str:
    words = []
    for item in metadata:
        bound = next(((attr, sign) for kind, attr, sign in BOUNDS if isinstance(item, kind)), None)
        if bound is not None:
            words.append(f"{bound[1]} {_plain(getattr(item, bound[0]))}")
        elif isinstance(item, at.MinLen):
            words.append(f"at least {item.min_length} item(s)")
        elif getattr(item, "pattern", None) is not None:
            words.append(f"matches `{item.pattern}`")
        else:
            raise TypeError(f"config reference: no words for the constraint {item!r}")
    return ", ".join(words)


def _join(*parts: str) -> str:
    return ", ".join(part for part in parts if part)


def _plain(value: Any) -> str:
    """A value as YAML would spell it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_plain(item) for item in value) + "]"
    if isinstance(value, BaseModel):
        return "{...}"
    return str(value)


def _value(default: Any) -> str:
    return "required" if default is PydanticUndefined else f"`{_plain(default)}`"


def _summary(model: type[BaseModel]) -> str:
    """The first paragraph of a model's docstring, on one line, roles as code spans."""
    text = inspect.cleandoc(model.__doc__ or "").split("\n\n")[0]
    return ROLE.sub(r"`\1`", " ".join(text.split())).replace("``", "`")


def config_markdown() -> str:
    """The config reference page: per task, a table of keys for each section."""
    lines = [
        "# Config reference",
        "",
        "Every key a config file may set, per task (`task:` at the top of the file), generated "
        "from the config models in `evogan/config/` when this site is built. A key is written "
        "in YAML as nested sections or on the command line as `--set PATH=VALUE`; `[]` stands "
        "for every item of a list (`spec.generator[].filters`: `filters` of each generator "
        "block). Types are YAML's; `required` marks a key without a default.",
    ]
    for task in TASKS:
        model = task_config(task)
        lines += ["", f"## `task: {task}`", "", _summary(model)]
        lines += _tables(task, model, config_keys(model))
    return "\n".join(lines) + "\n"


def _tables(task: str, model: type[BaseModel], keys: list[Key]) -> list[str]:
    """A table per section, in the order the sections appear."""
    sections: dict[str, tuple[type[BaseModel], list[Key]]] = {"": (model, [])}
    for key in keys:
        parent = key.path.rpartition(".")[0]
        sections[parent][1].append(key)
        if key.section is not None:
            prefix = key.path + ("[]" if key.type.startswith("list") else "")
            sections[prefix] = (key.section, [])
    lines: list[str] = []
    for prefix, (section, rows) in sections.items():
        title = f"`{prefix}`" if prefix else "top level"
        lines += ["", f"### {task}: {title}", ""]
        if prefix:
            lines += [_summary(section), ""]
        lines += ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
        lines += [_row(key) for key in rows]
    return lines


def _row(key: Key) -> str:
    cells = [f"`{key.path}`", key.type, key.default, key.allowed, key.description]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
