"""Architecture search campaigns for 3DGAN: a GA over islands of rank groups, Optuna, or
Population Based Training of the training hyper-parameters (one worker per rank group).

:func:`run_search` runs a ``task: search`` config (``evogan search``); :class:`Space` turns
genomes into shape-checked specs; :func:`evaluate` is the fitness of one candidate on a rank
group; :class:`Campaign` is the directory with the candidate table that ``--resume`` continues;
``campaign_report`` is what ``evogan report`` shows of campaigns.

The names are imported on first use (PEP 562): a campaign's run needs torch and MPI, and
``evogan search`` checks its config and data before they load (``data_fit``).
"""

from evogan.lazy import lazy_names

_LAZY = {
    "Campaign": ".campaign",
    "Evaluation": ".evaluation",
    "Genome": ".space",
    "Scorer": ".scoring",
    "Space": ".space",
    "evaluate": ".fitness",
    "flop_count": ".fitness",
    "resolve_base": ".campaign",
    "run_search": ".run",
    "weight_count": ".fitness",
}

__all__ = sorted(_LAZY)

__getattr__ = lazy_names(__name__, _LAZY)
