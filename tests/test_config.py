"""Config loading: typed values, one-line errors naming key, value and what is allowed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from evogan.config import RegressorConfig, load_config
from evogan.errors import ConfigError
from evogan.search.campaign import resolve_base

from .conftest import evogan, evogan_here


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_and_types(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "task: regressor\nga:\n  children: 4\n"))
    assert isinstance(config, RegressorConfig)
    assert config.ga.children == 4
    assert config.ga.initial_parents == 8
    assert config.data.synthetic.energy_range == (2.0, 500.0)


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "ga:\n  mutaton_rate: 0.1\n"))
    assert "unknown key ga.mutaton_rate" in message
    assert "did you mean ga.mutation_rate" in message


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "ga:\n  children: many\n"))
    assert "ga.children" in message and "'many'" in message and "integer" in message


def test_out_of_range_names_the_bound(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "ga:\n  mutation_rate: 1.5\n"))
    assert "ga.mutation_rate = 1.5" in message and "less than or equal to 1" in message


def test_energy_range_out_of_order(tmp_path: Path) -> None:
    message = error_of(write(tmp_path, "data:\n  synthetic:\n    energy_range: [500, 2]\n"))
    assert "data.synthetic" in message and "0 < low < high" in message


@pytest.mark.parametrize(("targets", "outside"), [("[-1]", "-1"), ("[10, 5]", "10, 5")])
def test_mape_targets_are_fractions(tmp_path: Path, targets: str, outside: str) -> None:
    message = error_of(write(tmp_path, f"test_target_mape: {targets}\n"))
    assert f"test_target_mape = {targets} is not allowed" in message
    assert f"fraction in (0, 1), e.g. 0.05 for 5% (not {outside})" in message


def test_reevaluation_first_stage_must_fit_in_the_sample(tmp_path: Path) -> None:
    path = write(tmp_path, "ga:\n  reevaluation_events: 64\n")
    message = error_of(path, ["ga.reevaluation_first=64"])
    assert (
        "ga.reevaluation_first = 64" in message and "below ga.reevaluation_events = 64" in message
    )
    assert "ga.reevaluation_z = 0" in error_of(path, ["ga.reevaluation_z=0"])
    assert load_config(path, ["ga.reevaluation_first=63"]).ga.reevaluation_first == 63


def test_overrides_set_nested_keys_with_yaml_values(tmp_path: Path) -> None:
    path = write(tmp_path, "ga:\n  children: 4\n")
    config = load_config(path, ["ga.mutation_rate=0.05", "data.files=[a.h5, b.h5]"])
    assert config.ga.mutation_rate == pytest.approx(0.05)
    assert config.data.files == ["a.h5", "b.h5"]
    assert "unknown key ga.nope" in error_of(path, ["ga.nope=1"])
    assert "must look like key.subkey=value" in error_of(path, ["ga.children"])


def test_unknown_task_and_bad_files(tmp_path: Path) -> None:
    assert "task = 'painting'" in error_of(write(tmp_path, "task: painting\n"))
    assert "is not valid YAML at line" in error_of(write(tmp_path, "a: 1\nb: [1\nc: 2\n"))
    assert "must hold a mapping" in error_of(write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


def test_empty_non_utf8_and_directory_configs_are_one_line(tmp_path: Path) -> None:
    assert "is empty; start from one in configs/" in error_of(write(tmp_path, ""))
    assert "is empty" in error_of(write(tmp_path, "# only a comment\n"))
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("run:\n  name: caf\xe9\n".encode("latin-1"))
    assert "is not UTF-8 text (byte 16); save it as UTF-8 YAML" in error_of(latin)
    assert "is a directory; pass a YAML file inside it" in error_of(tmp_path)
    for path in (latin, tmp_path):
        done = evogan_here("evolve", str(path))
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


SHIPPED = sorted(Path(__file__).parents[1].joinpath("configs").glob("*.yaml"))
SHIPPED_TINY_SEARCH = Path(__file__).parents[1] / "configs" / "arch_search_tiny.yaml"


@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_shipped_configs_validate(path: Path, tmp_path: Path, monkeypatch) -> None:
    """From any working directory: a search config finds its base spec beside it."""
    monkeypatch.chdir(tmp_path)
    config = load_config(path)
    if config.task == "search":
        assert resolve_base(config, path).spec is not None


def test_a_search_base_that_is_nowhere_names_both_places(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    search = tmp_path / "configs" / "search.yaml"
    search.parent.mkdir()
    raw = yaml.safe_load(SHIPPED_TINY_SEARCH.read_text())
    search.write_text(yaml.safe_dump({**raw, "base": "gan3d_tiny.yaml"}))
    with pytest.raises(ConfigError) as error:
        resolve_base(load_config(search), search)
    assert str(error.value) == (
        "base = 'gan3d_tiny.yaml' must be a spec YAML file, but neither gan3d_tiny.yaml nor "
        f"{search.parent / 'gan3d_tiny.yaml'} exists; give its path from the search config's "
        "folder, or an absolute one"
    )


def test_cli_reports_one_line_without_traceback(tmp_path: Path) -> None:
    result = evogan("data", "inspect", str(tmp_path / "absent.h5"))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evogan: error:")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("command", "config", "instead"),
    [
        ("evolve", "gan3d_tiny.yaml", "`evogan train`"),
        ("train", "arch_search_tiny.yaml", "`evogan search`"),
        ("search", "regressor_ga.yaml", "`evogan evolve` (GA, hybrid) or `evogan train` (RMSprop)"),
    ],
)
def test_a_config_of_another_command_names_the_command_that_runs_it(
    command: str, config: str, instead: str, capsys
) -> None:
    from evogan.cli import main

    path = Path(__file__).parents[1] / "configs" / config
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"cannot be run by `evogan {command}`" in err
    assert err.endswith(f"config runs with {instead}")


def _float_paths(model: type, prefix: tuple = ()) -> list[tuple]:
    """Paths (keys and list indices) of every float setting of ``model``, sections included:
    the first item of a list of sections stands for all of them."""
    import typing

    from pydantic import BaseModel

    found = []
    for name, field in model.model_fields.items():
        kinds, listed = [field.annotation], False
        while any(typing.get_args(kind) for kind in kinds):  # unwrap Optional, list, tuple
            listed = listed or any(typing.get_origin(kind) is list for kind in kinds)
            kinds = [inner for kind in kinds for inner in (typing.get_args(kind) or (kind,))]
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                found += _float_paths(kind, (*prefix, name, *((0,) if listed else ())))
        if float in kinds:
            found.append((*prefix, name))
    return found


CONFIGS = Path(__file__).parents[1] / "configs"


@pytest.mark.parametrize(
    "config", ["regressor_ga.yaml", "gan3d_tiny.yaml", "arch_search_tiny.yaml"]
)
@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_every_float_setting_refuses_inf_and_nan(config: str, bad: float) -> None:
    """No setting means infinity: each float key of each task (every section, the spec and a
    search's genes included) refuses inf and nan at load, in one line naming it."""
    from evogan.config.base import validate

    path = CONFIGS / config
    loaded = load_config(path)
    if loaded.task == "search":  # its base spec inline, so the spec's keys are walked too
        loaded = resolve_base(loaded, path)
    raw = loaded.model_dump(mode="json")
    paths = _float_paths(type(loaded))
    assert len(paths) > 10
    for path in paths:
        changed = copy.deepcopy(raw)
        node = changed
        for part in path[:-1]:
            node = node[part]
        value = node.get(path[-1])
        if isinstance(value, list):  # a range or a list of floats: spoil its last one
            node[path[-1]] = [*value[:-1], bad] if value else [bad]
        else:
            node[path[-1]] = bad
        with pytest.raises(ConfigError) as info:
            validate(type(loaded), changed, source="run.yaml")
        message = str(info.value)
        key = ".".join(map(str, path))
        assert message.startswith(f"run.yaml: {key}") and "\n" not in message, message
        assert "it must be a finite number (no setting takes inf or nan)" in message


def test_a_search_gene_choice_must_be_finite(tmp_path: Path) -> None:
    raw = yaml.safe_load((CONFIGS / "arch_search_tiny.yaml").read_text())
    raw["base"] = str(CONFIGS / "gan3d_tiny.yaml")
    choices = [1e-3, float("inf")]
    raw["space"][-1] = {"name": "lr", "type": "categorical", "path": "d_lr", "choices": choices}
    message = error_of(write(tmp_path, yaml.safe_dump(raw)))
    assert "gene lr: every choice must be finite, got [0.001, inf]" in message


def test_g_lr_inf_is_refused_before_a_run_directory(tmp_path: Path) -> None:
    """The GAN that trained to NaN and saved it as best_model.h5 is refused at load."""
    run = tmp_path / "run"
    config = str(CONFIGS / "gan3d_tiny.yaml")
    result = evogan_here("train", config, "--set", "spec.g_lr=inf", "--run-dir", str(run))
    assert result.returncode == 2 and not run.exists()
    assert result.stderr.strip() == (
        f"evogan: error: {config}: spec.g_lr = 'inf' is not allowed: it must be a finite number "
        "(no setting takes inf or nan)"
    )


def test_runs_stored_with_earlier_key_names_resume_in_todays(tmp_path: Path) -> None:
    """Run configs written before the shared migration keys and the shared run section load
    on resume; a new config with the old keys is refused naming the new one."""
    from evogan.config.resume import load_run_config

    repo = Path(__file__).resolve().parents[1] / "configs"
    regressor = yaml.safe_load((repo / "islands_smoke.yaml").read_text())
    regressor["migration"] = {"interval": 3, "k": 2}
    regressor.setdefault("run", {})["energy_bins"] = 7
    gan = yaml.safe_load((repo / "gan3d_tiny.yaml").read_text())
    gan["run"]["energy_bins"] = 10
    for name, raw in (("regressor", regressor), ("gan", gan)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text(yaml.safe_dump(raw))
    old = load_run_config(tmp_path / "regressor", [])
    assert (old.migration.every, old.migration.migrants, old.run.energy_bins) == (3, 2, 7)
    assert "energy_bins" not in load_run_config(tmp_path / "gan", []).run.model_dump()
    with pytest.raises(ConfigError, match=r"it is now migration\.every"):
        load_config(tmp_path / "regressor" / "config.yaml")
