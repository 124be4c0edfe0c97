"""Classifier two-sample test: how well a small classifier tells generated from reference
showers, as the area under the ROC curve on held-out events (0.5: indistinguishable, 1: every
shower recognised).

The classifier is a logistic regression on the standardised features and all their pairwise
products (a quadratic decision surface sees wrong means, widths and correlations, e.g. showers
without fluctuations), fitted by Newton's method with an L2 penalty. It is trained on one half of
each set and evaluated on the other; the error is the Hanley-McNeil standard error of the AUC.

:func:`network_classifier` is the CaloChallenge's kind of classifier (a fully connected network
on voxels or on high-level features, train/validation/test splits, early stopping, isotonic
calibration, AUC and JSD on the test part); torch is imported only when it runs.

It needs no scipy: importing ``scipy.stats`` or ``scipy.optimize`` costs 0.4-0.5 s, paid by every
process that scores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

L2 = 1e-2


def quadratic_features(x: np.ndarray) -> np.ndarray:
    """``x`` (n, d) and its pairwise products x_i x_j (i <= j): (n, d + d (d + 1) / 2)."""
    rows, cols = np.triu_indices(x.shape[1])
    return np.hstack([x, x[:, rows] * x[:, cols]])


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weights (bias last) of an L2-penalised logistic regression, by Newton's method with a
    halving line search: the loss is strictly convex in the penalised weights, so a few steps
    reach its one minimum, without scipy.optimize (0.4 s to import in every scoring process)."""
    design = np.hstack([x, np.ones((len(x), 1))])
    penalty = np.full(design.shape[1], L2)
    penalty[-1] = 0.0  # the bias is not penalised

    def loss(w: np.ndarray) -> float:
        z = design @ w
        return float(np.logaddexp(0.0, z).sum() - y @ z + 0.5 * (penalty * w) @ w)

    w = np.zeros(design.shape[1])
    value = loss(w)
    for _ in range(100):
        p = 0.5 * (1.0 + np.tanh(0.5 * (design @ w)))  # the logistic function, without overflow
        grad = design.T @ (p - y) + penalty * w
        if np.abs(grad).max() <= 1e-8 * len(y):
            break
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + np.diag(penalty + 1e-12)
        step = np.linalg.solve(hessian, grad)
        for _ in range(40):
            trial = loss(w - step)
            if trial <= value:
                break
            step = step / 2
        else:
            break
        w, value = w - step, trial
    return w


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``values``, ties sharing their mean rank (``scipy.stats.rankdata``'s
    default); all NaN if any value is NaN."""
    values = np.asarray(values, dtype=np.float64)
    if np.isnan(values).any():
        return np.full(values.shape, np.nan)
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def auc(score_pos: np.ndarray, score_neg: np.ndarray) -> tuple[float, float]:
    """ROC AUC (Mann-Whitney, ties counted half) and its Hanley-McNeil standard error."""
    m, n = len(score_pos), len(score_neg)
    ranks = average_ranks(np.concatenate([score_pos, score_neg]))
    area = (ranks[:m].sum() - m * (m + 1) / 2) / (m * n)
    q1, q2 = area / (2 - area), 2 * area**2 / (1 + area)
    var = (area * (1 - area) + (m - 1) * (q1 - area**2) + (n - 1) * (q2 - area**2)) / (m * n)
    return float(area), float(np.sqrt(max(var, 0.0)))


def classifier_auc(
    real: np.ndarray, gen: np.ndarray, rng: np.random.Generator
) -> tuple[float, float]:
    """Held-out AUC of generated (positive) vs reference (negative) feature rows, with error.

    Sets are trimmed to the same size so the classifier cannot win on class frequencies."""
    n = min(len(real), len(gen))
    if n < 4:
        return 0.5, 0.5
    real = real[rng.permutation(len(real))[:n]]
    gen = gen[rng.permutation(len(gen))[:n]]
    half = n // 2
    x_train = quadratic_features(np.vstack([real[:half], gen[:half]]))
    scale = x_train.std(axis=0)
    scale[scale == 0] = 1.0
    centre = x_train.mean(axis=0)
    y_train = np.concatenate([np.zeros(half), np.ones(half)])
    w = _fit((x_train - centre) / scale, y_train)

    def predict(x: np.ndarray) -> np.ndarray:
        return ((quadratic_features(x) - centre) / scale) @ w[:-1] + w[-1]

    return auc(predict(gen[half:]), predict(real[half:]))


@dataclass(frozen=True)
class NetworkSetup:
    """The challenge's DNN classifier, sized for a CPU: fully connected layers with LeakyReLU,
    Adam, binary cross-entropy on logits, and early stopping on the validation loss. The
    challenge uses three layers of 512 for up to 50 epochs on a GPU; three of 128 and a larger
    step keep 10k showers per side within minutes on two cores (docs/explanation/validation.md), at
    the price of a network that may see less than the challenge's. Training stops after ``patience``
    epochs that lower the validation loss by less than ``min_delta`` (a set told apart almost
    perfectly stops early, where the challenge's runs its epochs out)."""

    hidden: tuple[int, ...] = (128, 128, 128)
    learning_rate: float = 1e-3
    batch_size: int = 1000
    max_epochs: int = 50
    patience: int = 4
    min_delta: float = 1e-3  # validation-loss gain (nats) that counts as an improvement
    split: tuple[float, float, float] = (0.6, 0.2, 0.2)  # train, validation, test


@dataclass(frozen=True)
class NetworkResult:
    """Test-part AUC and JSD (in units of ln 2: 0 identical, 1 disjoint) with their errors."""

    auc: float
    auc_error: float
    jsd: float
    jsd_error: float
    epochs: int
    events: int  # test events per side


def network_classifier(
    real: np.ndarray,
    gen: np.ndarray,
    seed: int,
    setup: NetworkSetup | None = None,
    standardise: bool = True,
) -> NetworkResult:
    """Train the DNN to tell ``gen`` (label 1) from ``real`` (label 0) rows, as the CaloChallenge
    does: both sets trimmed to one size and split train/validation/test alike; the epoch with the
    lowest validation loss is kept, its probabilities calibrated by isotonic regression on the
    validation part; AUC (Hanley-McNeil error) and JSD = 1 - BCE / ln 2 (error: the spread of the
    per-event losses) on the test part. ``standardise`` scales each input column by its training
    mean and spread (for inputs not already of order one)."""
    import torch

    setup = setup or NetworkSetup()
    rng = np.random.default_rng(seed)
    n = min(len(real), len(gen))
    cuts = np.cumsum(np.floor(np.asarray(setup.split) * n).astype(int))[:2]
    if min(cuts[0], cuts[1] - cuts[0], n - cuts[1]) < 2:
        return NetworkResult(0.5, 0.5, 0.0, 1.0, 0, 0)
    parts = []
    for rows, label in ((real, 0.0), (gen, 1.0)):
        picked = np.asarray(rows, dtype=np.float32)[rng.permutation(len(rows))[:n]]
        parts.append([(x, np.full(len(x), label)) for x in np.split(picked, cuts)])
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = (
        (
            np.vstack([parts[0][i][0], parts[1][i][0]]),
            np.concatenate([parts[0][i][1], parts[1][i][1]]),
        )
        for i in range(3)
    )
    centre, scale = np.zeros(x_tr.shape[1], np.float32), np.ones(x_tr.shape[1], np.float32)
    if standardise:
        centre, scale = x_tr.mean(axis=0), x_tr.std(axis=0)
        scale[scale == 0] = 1.0
    torch.manual_seed(seed)
    model, epochs = _train(
        [torch.from_numpy((x - centre) / scale) for x in (x_tr, x_va)],
        [torch.from_numpy(y.astype(np.float32)) for y in (y_tr, y_va)],
        setup,
    )
    with torch.no_grad():
        p_va, p_te = (
            torch.sigmoid(model(torch.from_numpy((x - centre) / scale))).squeeze(1).double().numpy()
            for x in (x_va, x_te)
        )
    p_te = isotonic_calibration(p_va, y_va)(p_te)
    area, area_err = auc(p_te[y_te == 1], p_te[y_te == 0])
    losses = -(y_te * np.log(p_te) + (1 - y_te) * np.log1p(-p_te)) / np.log(2.0)
    jsd_err = float(losses.std(ddof=1) / np.sqrt(len(losses)))
    return NetworkResult(
        area, area_err, float(1.0 - losses.mean()), jsd_err, epochs, len(p_te) // 2
    )


def _train(x: list, y: list, setup: NetworkSetup) -> tuple:
    """The network fitted on ``x[0]`` with early stopping on ``x[1]``: the best state, epochs."""
    import copy

    import torch

    from evogan.optimizer import Adam

    layers: list = []
    width = x[0].shape[1]
    for hidden in setup.hidden:
        layers += [torch.nn.Linear(width, hidden), torch.nn.LeakyReLU()]
        width = hidden
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 1))
    optimiser = Adam(model.parameters(), lr=setup.learning_rate)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    best, best_state, since, epochs = float("inf"), copy.deepcopy(model.state_dict()), 0, 0
    while epochs < setup.max_epochs and since < setup.patience:
        epochs += 1
        model.train()
        for batch in torch.randperm(len(y[0])).split(setup.batch_size):
            optimiser.zero_grad()
            loss_fn(model(x[0][batch]).squeeze(1), y[0][batch]).backward()
            optimiser.step()
        model.eval()
        with torch.no_grad():
            loss = float(loss_fn(model(x[1]).squeeze(1), y[1]))
        if loss < best - setup.min_delta:
            best, best_state, since = loss, copy.deepcopy(model.state_dict()), 0
        else:
            since += 1
            if loss < best:
                best, best_state = loss, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    model.eval()
    return model, epochs


def isotonic_calibration(
    prob: np.ndarray, label: np.ndarray, low: float = 1e-6, high: float = 1 - 1e-6
) -> Callable[[np.ndarray], np.ndarray]:
    """The non-decreasing map of probabilities to label frequencies that fits ``label`` best in
    least squares (pool adjacent violators), interpolated between the fitted points and clipped
    to [low, high] (the challenge's isotonic calibration: finite log-losses)."""
    order = np.argsort(prob, kind="mergesort")
    x, y = np.asarray(prob, np.float64)[order], np.asarray(label, np.float64)[order]
    values, weights, counts = [], [], []
    for value in y:
        values.append(value)
        weights.append(1.0)
        counts.append(1)
        while len(values) > 1 and values[-2] > values[-1]:
            w = weights[-2] + weights[-1]
            values[-2] = (values[-2] * weights[-2] + values[-1] * weights[-1]) / w
            weights[-2], counts[-2] = w, counts[-2] + counts[-1]
            del values[-1], weights[-1], counts[-1]
    fitted = np.repeat(values, counts)
    return lambda p: np.clip(np.interp(p, x, fitted), low, high)
