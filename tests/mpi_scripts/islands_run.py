"""Run ``evogan evolve`` (the regressor island model) under mpirun, optionally making one rank
artificially slow (``--slow-rank R --slow-seconds S`` per evaluation) or making it raise after
a number of evaluations (``--fail-rank R --fail-after N``), to test async migration and
failure handling.
"""

from __future__ import annotations

import argparse
import time

from evogan.config import load_config
from evogan.distributed import guard, world_comm
from evogan.regressor.evolve import evolve_regressor
from evogan.regressor.problem import RegressorProblem


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("run_dir")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-seconds", type=float, default=0.0)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--fail-after", type=int, default=0)
    args = parser.parse_args()
    rank = world_comm().rank
    evaluate = RegressorProblem.evaluate
    calls = [0]

    def altered(self, genomes, batch):
        calls[0] += 1
        if rank == args.fail_rank and calls[0] > args.fail_after:
            raise RuntimeError(f"deliberate failure after {args.fail_after} evaluations")
        if rank == args.slow_rank:
            time.sleep(args.slow_seconds)
        return evaluate(self, genomes, batch)

    RegressorProblem.evaluate = altered
    evolve_regressor(load_config(args.config, args.overrides), args.run_dir)


if __name__ == "__main__":
    with guard():
        main()
