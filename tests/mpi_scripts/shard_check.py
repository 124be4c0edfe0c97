"""Each rank streams its shard of the data and reports which events it read.

Used by tests/test_layouts_reader.py and tests/test_default_data.py. Events are identified by
their energy (the fixtures give event i of the data set the energy 10 + i GeV). With
``--default-cache`` every rank asks for the default synthetic set at the same moment, which
exercises the lock that lets only one rank generate it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from evogan.config.data import DataConfig, SyntheticConfig
from evogan.data.default import ensure_default_data
from evogan.data.reader import open_dataset
from evogan.distributed import world_comm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", nargs="*", default=[])
    parser.add_argument("--default-events", type=int, default=0)
    parser.add_argument("--chunk-events", type=int, default=3)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    world = world_comm()
    messages: list[str] = []
    report: dict[str, object] = {"rank": world.rank, "size": world.size}
    if args.default_events:
        world.Barrier()  # start together so the ranks race for the cache
        path = ensure_default_data(
            SyntheticConfig(events=args.default_events, seed=7), announce=messages.append
        )
        report["path"] = str(path)
    else:
        cfg = DataConfig(files=args.files, test_fraction=0.25, chunk_events=args.chunk_events)
        train, _ = open_dataset(cfg, announce=messages.append)
        shard = train.shard(world.rank, world.size)
        energies = [float(e) for c in shard.iter_chunks() for e in c.energy]
        report["events"] = [round(e - 10.0) for e in energies]
        report["train_events"] = len(train)
    report["messages"] = messages
    (args.out / f"rank{world.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
