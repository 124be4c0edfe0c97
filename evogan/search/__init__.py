"""Architecture search campaigns for 3DGAN: a GA over islands of rank groups, Optuna, or
Population Based Training of the training hyper-parameters (one worker per rank group).

:func:`run_search` runs a ``task: search`` config (``evogan search``); :class:`Space` turns
genomes into shape-checked specs; :func:`evaluate` is the fitness of one candidate on a rank
group; :class:`Campaign` is the directory with the candidate table that ``--resume`` continues;
``campaign_report`` is what ``evogan report`` shows of campaigns.
"""

from evogan.search.campaign import Campaign, resolve_base
from evogan.search.evaluation import Evaluation
from evogan.search.fitness import evaluate, flop_count, weight_count
from evogan.search.run import run_search
from evogan.search.scoring import Scorer
from evogan.search.space import Genome, Space

__all__ = [
    "Campaign",
    "Evaluation",
    "Genome",
    "Scorer",
    "Space",
    "evaluate",
    "flop_count",
    "resolve_base",
    "run_search",
    "weight_count",
]
