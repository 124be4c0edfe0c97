"""Run directories, atomic writes, JSONL metrics and HDF5 weights."""

from __future__ import annotations

import h5py
import pytest
import torch

from evogan.errors import DataError, EvoganError
from evogan.store import (
    MetricsWriter,
    RunDir,
    atomic_path,
    atomic_write,
    load_meta,
    load_weights,
    read_metrics,
    save_weights,
)


def test_atomic_write_replaces_whole_files_and_leaves_no_temporaries(tmp_path) -> None:
    target = tmp_path / "deep" / "file.txt"
    atomic_write(target, "first")
    atomic_write(target, b"second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_atomic_path_keeps_the_old_file_when_the_writer_fails(tmp_path) -> None:
    target = tmp_path / "model.h5"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["model.h5"]


def test_metrics_are_strict_json_lines_and_survive_a_torn_line(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsWriter(path) as writer:
        writer.write({"kind": "generation", "best": 0.5, "std": float("nan")})
        writer.write({"kind": "epoch", "test_mape": float("inf")})
    with open(path, "a") as stream:
        stream.write('{"kind": "generation", "be')
    assert read_metrics(path) == [
        {"kind": "generation", "best": 0.5, "std": None},
        {"kind": "epoch", "test_mape": None},
    ]
    assert read_metrics(path, kind="epoch") == [{"kind": "epoch", "test_mape": None}]


def test_weights_round_trip_exactly_with_metadata(tmp_path) -> None:
    state = {
        "conv.weight": torch.randn(8, 1, 5, 5),
        "linear.bias": torch.randn(1),
        "a/b": torch.ones(2),
    }
    path = save_weights(tmp_path / "best.h5", state, {"method": "ga", "fitness": 0.05})
    loaded, meta = load_weights(path)
    assert list(loaded) == list(state)
    assert all(torch.equal(loaded[k], state[k]) for k in state)
    assert meta == load_meta(path) == {"method": "ga", "fitness": 0.05}


@pytest.mark.parametrize("read", [load_weights, load_meta])
def test_weights_readers_reject_other_files(tmp_path, read) -> None:
    with pytest.raises(DataError, match="does not exist"):
        read(tmp_path / "missing.h5")
    with h5py.File(tmp_path / "other.h5", "w") as handle:
        handle["ECAL"] = [1.0]
    with pytest.raises(DataError, match="not an evogan weights file"):
        read(tmp_path / "other.h5")
    (tmp_path / "text.h5").write_text("not hdf5")
    with pytest.raises(DataError, match="not a readable HDF5"):
        read(tmp_path / "text.h5")


def test_run_dirs_are_named_by_method_and_never_reused(tmp_path) -> None:
    first = RunDir.create("ga", root=tmp_path)
    second = RunDir.create("ga", root=tmp_path)
    assert first.name.startswith("ga-") and second.name.startswith("ga-")
    assert first.path != second.path
    named = RunDir.create("ga", root=tmp_path, name="mine")
    assert named.path == tmp_path / "mine"
    named.write_summary({"method": "ga", "test_mape": float("nan")})
    assert RunDir.open(named.path).summary() == {"method": "ga", "test_mape": None}
    with pytest.raises(EvoganError, match="not empty"):
        RunDir.create("ga", path=named.path)
    with pytest.raises(EvoganError, match="not an evogan run directory"):
        RunDir.open(first.path)


def test_checkpoints_round_trip_and_name_a_format_from_another_version(tmp_path) -> None:
    import numpy as np

    from evogan.store.checkpoint import FORMAT, read_checkpoint, write_checkpoint

    arrays = {"genomes": np.arange(6, dtype=np.float32).reshape(2, 3)}
    records = '[{"epoch": 0, "test_mape": 0.5}]'  # kept serialized by the caller
    path = tmp_path / "gen-00000010.h5"
    write_checkpoint(path, arrays, {"generation": 10}, {"r": records})
    back, meta = read_checkpoint(path)
    assert np.array_equal(back["genomes"], arrays["genomes"])
    assert meta == {"generation": 10, "r": [{"epoch": 0, "test_mape": 0.5}]}
    with h5py.File(path, "r+") as handle:
        handle.attrs["format"] = "evogan-checkpoint-1"
    with pytest.raises(DataError, match=r"another evogan version .*start a new run"):
        read_checkpoint(path)
    with h5py.File(path, "r+") as handle:
        handle.attrs["format"] = "something else"
    with pytest.raises(DataError, match=rf"not an evogan checkpoint \(format {FORMAT}"):
        read_checkpoint(path)


def test_growing_checkpoint_parts_convert_only_new_rows_and_match_a_fresh_conversion() -> None:
    import json

    from deap import tools

    from evogan.islands.state import GrowingParts

    logbook, records = tools.Logbook(), []
    logbook.header = ["generation", "best"]
    growing = GrowingParts()
    for generation in range(7):
        logbook.record(generation=generation, best=1.0 / (generation + 1))
        records.append({"epoch": generation, "elite_fitness": float("inf") if generation else 2.0})
        if generation in (2, 6):
            table, integers = growing.logbook(logbook)
            text = growing.epoch_records(records)
    fresh_table, fresh_integers = GrowingParts().logbook(logbook)
    assert table.shape == (2, 7) and (table == fresh_table).all()
    assert integers == fresh_integers == ["generation"]
    assert text == GrowingParts().epoch_records(records)
    assert json.loads(text)[1] == {"epoch": 1, "elite_fitness": None}  # strict JSON: inf -> null


def test_a_run_is_locked_by_its_process_and_released_when_it_ends(tmp_path) -> None:
    import subprocess
    import sys

    from evogan.store.lock import lifecycle, read_status, settle

    other = (
        "import sys; from evogan.store.lock import lifecycle, claim\n"
        "with lifecycle():\n    claim(sys.argv[1], resume=True)\n"
    )
    run = RunDir.create("ga", root=tmp_path, name="run")  # outside lifecycle: no lock, no status
    assert read_status(run.path) is None and not (run.path / ".lock").exists()
    with lifecycle():
        run = RunDir.create("ga", root=tmp_path, name="locked")
        assert read_status(run.path)["status"] == "running"
        held = subprocess.run(
            [sys.executable, "-c", other, str(run.path)], capture_output=True, text=True
        )
        assert held.returncode != 0
        assert f"run directory {run.path} is in use by pid " in held.stderr
        settle("stopped")
    free = subprocess.run([sys.executable, "-c", other, str(run.path)], capture_output=True)
    assert free.returncode == 0, free.stderr


def test_a_refused_resume_keeps_the_status_it_found(tmp_path) -> None:
    from evogan.store.lock import claim, lifecycle, read_status, settle_refused, write_status

    run = tmp_path / "run"
    run.mkdir()
    write_status(run, "stopped")
    with lifecycle():
        claim(run, resume=True)
        assert read_status(run)["status"] == "running"
        settle_refused("resume it with mpirun -n 2")
    assert read_status(run)["status"] == "stopped"
    write_status(run, "failed", "boom")
    with pytest.raises(EvoganError, match=r"failed \(boom\).*--force"), lifecycle():
        claim(run, resume=True)
    with lifecycle():
        claim(run, resume=True, force=True)
        settle_refused("wrong rank count")
    assert read_status(run)["status"] == "failed"


def test_resume_commands_quote_the_run_path(tmp_path) -> None:
    import shlex

    from evogan.store.lock import check_resumable, write_status

    run = tmp_path / "my run"
    run.mkdir()
    write_status(run, "running")
    with pytest.raises(EvoganError) as info:
        check_resumable(run)
    assert shlex.split(str(info.value))[-3:] == ["--resume", str(run), "--force"]


@pytest.mark.parametrize("name", ["..", "../up", "/abs/olute", "a/b", ""])
def test_run_names_are_plain_names(tmp_path, name) -> None:
    with pytest.raises(EvoganError, match="must be a plain directory name"):
        RunDir.create("ga", root=tmp_path / "root", name=name)
    assert not (tmp_path / "root").exists() and not (tmp_path / "up").exists()


def test_a_run_ended_after_a_noted_stop_signal_resumes_without_force(tmp_path, capsys) -> None:
    """A launcher that kills the process right after a stop signal (mpirun on Ctrl-C) leaves
    ``running`` with the signal noted; the next resume needs no --force and says why."""
    from evogan.store.lock import (
        check_resumable,
        claim,
        lifecycle,
        note_signal,
        read_status,
        settle,
    )

    run = tmp_path / "run"
    run.mkdir()
    note_signal("SIGTERM")  # no run held: nothing to note
    assert read_status(run) is None
    with lifecycle():
        claim(run)
        note_signal("SIGTERM")
    record = read_status(run)  # leaving lifecycle without settle: as a killed process leaves it
    assert (record["status"], record["signal"]) == ("running", "SIGTERM")
    check_resumable(run)
    assert "ended by its launcher after SIGTERM" in capsys.readouterr().err
    with lifecycle():
        claim(run, resume=True)
        settle("stopped")
    assert read_status(run)["status"] == "stopped" and "signal" not in read_status(run)
