"""Every point-to-point MPI message tag used by evogan, in one place so no two uses collide."""

from __future__ import annotations

from enum import IntEnum


class Tag(IntEnum):
    """Message tags; each ring also works on its own duplicated communicator."""

    RING_PAYLOAD = 101
    """A float32 payload (fused gradients) sent to the right-hand ring neighbour."""
    RING_COUNT = 102
    """How many payloads a rank sent in total, exchanged once when a ring closes."""
    SEARCH_MIGRANT = 301
    """Architecture genomes (with their evaluations) sent between search islands."""
    SEARCH_RESULT = 302
    """A group leader's finished candidate (or first request) sent to the study owner."""
    SEARCH_TRIAL = 303
    """The study owner's next trial for a group leader (None: stop)."""
    SEARCH_RUNG = 304
    """A group leader's rung score (job id, budget point, mean score) sent to the study owner."""
    SEARCH_PRUNE = 305
    """The study owner's answer to a rung score: the reason to stop the candidate, or None."""
    MIGRANTS = 103
    """A pickled list of migrants sent from one island leader to another."""
    FAILURE = 901
    """A rank's exit code sent to rank 0 when an error ends it, so an error every rank hit is
    printed once (:mod:`evogan.distributed.failure`)."""
