"""The cell threshold: one rule for every shower, read from a file or made by a generator.

Files are thresholded as they are read (:func:`evogan.data.hdf5.clean_cells`), and the score
applies the same rule to every set it compares (:class:`evogan.physics.Reference`), so showers
score the same whichever way they arrive. The rule is idempotent: cleaned cells stay as they are.
"""

from __future__ import annotations

import numpy as np


def zero_below(cells: np.ndarray, threshold: float) -> None:
    """In place on float32 ``cells``: cells below ``threshold`` (GeV) -> 0, negative ones too;
    a cell equal to the threshold is kept. NaN is left as it is.

    torch's fused in-place threshold is about twice as numpy's compare-and-multiply
    and shares the memory; it zeroes x <= t, so t is the float32 just below the threshold.
    """
    import torch  # here, not at the top: commands that only open files stay fast to start

    if cells.dtype != np.float32:
        raise TypeError(f"cells must be float32 to be thresholded in place, got {cells.dtype}")
    keep_above = float(np.nextafter(np.float32(threshold), np.float32(-np.inf)))
    torch.nn.functional.threshold_(torch.from_numpy(cells), keep_above, 0.0)
