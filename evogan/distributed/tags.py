"""Every point-to-point MPI message tag used by evogan, in one place so no two uses collide."""

from __future__ import annotations

from enum import IntEnum


class Tag(IntEnum):
    """Message tags; each ring also works on its own duplicated communicator."""

    RING_PAYLOAD = 101
    """A float32 payload (fused gradients) sent to the right-hand ring neighbour."""
    RING_COUNT = 102
    """How many payloads a rank sent in total, exchanged once when a ring closes."""
