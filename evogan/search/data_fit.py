"""Whether a campaign's data fit it: showers in the base spec's cell window, a test split
large enough for the score and its energy bins. :func:`check_planned_data` asks it of the data
a config will read before torch and MPI load (``evogan search``);
:func:`evogan.search.scoring.check_data` again of the data it has read, with the same function
and so the same lines."""

from __future__ import annotations

from pathlib import Path

from evogan.config.data import DataConfig
from evogan.config.search import SearchConfig
from evogan.config.search_sections import MIN_TEST_EVENTS
from evogan.data.plan import planned_dataset
from evogan.data.reader import ShowerDataset
from evogan.errors import ConfigError, DataError
from evogan.gan3d.model.spec import check_window
from evogan.search.campaign import resolve_base


def check_test_split(config: SearchConfig, test: ShowerDataset) -> None:
    """Refuse a ``test`` split the campaign's candidates cannot be scored on: of another cell
    window than the base spec's (the training files' cells are the test files' own), fewer
    events than the score or its energy bins need. ``config``'s base spec inline."""
    check_window(config.spec, test.shape, test.files)
    if len(test) < MIN_TEST_EVENTS:
        raise DataError(
            f"the test split holds {len(test)} event(s), fewer than the {MIN_TEST_EVENTS} the "
            f"fitness score needs (two halves of 4); {_more_test_data(config.data)}"
        )
    _check_bins(config, len(test))


def check_planned_data(config: SearchConfig, config_path: Path | None = None) -> None:
    """:func:`check_test_split` of the data ``config`` will read, from their metadata
    (:func:`evogan.data.plan.planned_dataset`), with its base spec read from a file where it
    names one (from ``config_path``'s folder)."""
    config = resolve_base(config, config_path)
    check_test_split(config, planned_dataset(config.data)[1])


def _check_bins(config: SearchConfig, held: int) -> None:
    """The reference (``fitness.test_events`` of the ``held`` test events) needs at least one
    event per energy bin; said with the search's keys."""
    fitness = config.fitness
    events = min(fitness.test_events, held)
    if events >= fitness.energy_bins:
        return
    more = _more_test_data(config.data)
    if fitness.test_events < held:
        more = "raise fitness.test_events"
    raise ConfigError(
        f"fitness.energy_bins = {fitness.energy_bins} needs at least as many reference events, "
        f"got {events} (fitness.test_events = {fitness.test_events}, test split {held}); "
        f"lower fitness.energy_bins, or {more}"
    )


def _more_test_data(data: DataConfig) -> str:
    """The settings that give the test split more events."""
    if data.test_events is not None:
        return f"raise data.test_events (= {data.test_events}) or use more data"
    if data.test_files:
        return "add events to data.test_files"
    return "use more data or raise data.test_fraction"
