"""The island model over MPI, for any engine strategy: :class:`Island` wraps a strategy and
adds lineages, immigrants, migration, stop agreement and checkpoints through its hooks
(``island``); migration topologies and immigration policies as plain functions and the MPI
exchange (``migration``); how weight migrants travel (``codec``); seed-compressed genomes
(``lineage``); :class:`IslandState`, what a checkpoint writes and reads (``state``); and the
island runtime shared by the regressor GA and the architecture search, communicators, stop
agreement, migration set-up and resume (``session``)."""

from evogan.islands.codec import Migrant, MigrantBytes, MigrantCodec
from evogan.islands.island import Island, IslandSettings
from evogan.islands.lineage import Lineage, Rebuilder, rebuild
from evogan.islands.migration import (
    Migration,
    Policy,
    Topology,
    compete,
    count_matrix,
    fully_connected,
    make_policy,
    make_topology,
    matrix_topology,
    random_neighbour,
    replace_last,
    replace_worst,
    ring,
)
from evogan.islands.session import IslandSession, SharedEvaluation
from evogan.islands.state import CheckpointWriter, IslandState, read_state

__all__ = [
    "CheckpointWriter",
    "Island",
    "IslandSession",
    "IslandSettings",
    "IslandState",
    "Lineage",
    "Migrant",
    "MigrantBytes",
    "MigrantCodec",
    "Migration",
    "Policy",
    "Rebuilder",
    "SharedEvaluation",
    "Topology",
    "compete",
    "count_matrix",
    "fully_connected",
    "make_policy",
    "make_topology",
    "matrix_topology",
    "random_neighbour",
    "read_state",
    "rebuild",
    "replace_last",
    "replace_worst",
    "ring",
]
