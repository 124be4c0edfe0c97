"""Damaged state files and symbolic links: every state file a run keeps between processes is read
through one loader that names the file, the damage and the repair in one line and writes
nothing first; a torn Optuna journal line is cut off (the file kept beside it), never appended
after; no symbolic link leads a run name or a checkpoint folder out of its run, and evogan
deletes only files it wrote; a refused command leaves the directory as it found it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from evogan.cli import main
from evogan.errors import EXIT_USER_ERROR, EvoganError
from evogan.store import MetricsWriter, RunDir, read_metrics
from evogan.store.lock import (
    STATUS,
    check_resumable,
    claim,
    lifecycle,
    read_status,
    settle_refused,
    write_status,
)
from evogan.store.metrics import append_synced
from evogan.store.state_files import read_state, repair_torn_tail, torn_tail
from tests.conftest import REPO, evogan, mpirun

GAN_CONFIG = str(REPO / "configs" / "gan3d_tiny.yaml")
GOOD = {"status": "stopped", "backend": "ga", "world_size": 2, "sessions": []}
DAMAGE = {
    "truncated": (lambda text: text[: len(text) // 2], "truncated: it ends inside its JSON"),
    "empty": (lambda text: b"", "empty"),
    "zero-filled": (lambda text: b"\0" * len(text), "zero-filled"),
    "wrong type": (lambda text: b'["stopped", 2]\n', "it holds a JSON list, not an object"),
    "not UTF-8": (lambda text: b"\xff" + text, "not UTF-8 text at byte 0"),
    "broken": (lambda text: text.replace(b":", b"=", 1), "not valid JSON at line 2 column"),
}


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry under ``folder``: a file's bytes, a link's target, a directory's mark."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_dir():
            found[name] = "dir"
        else:
            found[name] = path.read_bytes()
    return found


def damaged(path: Path, kind: str, record: dict | None = None) -> None:
    text = (json.dumps(record or GOOD, indent=2) + "\n").encode()
    path.write_bytes(DAMAGE[kind][0](text))


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == EXIT_USER_ERROR, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("evogan:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return lines[0]


# ---------------------------------------------------------------- the loader, file by file


@pytest.mark.parametrize("kind", DAMAGE)
def test_the_loader_names_the_file_the_damage_and_the_fix(tmp_path, kind) -> None:
    path = tmp_path / "state.json"
    damaged(path, kind)
    before = snapshot(tmp_path)
    with pytest.raises(EvoganError) as info:
        read_state(path, "restore it from a backup")
    message = str(info.value)
    assert message.startswith(f"{path} is damaged ({DAMAGE[kind][1]}")
    assert message.endswith("; restore it from a backup") and "\n" not in message
    assert snapshot(tmp_path) == before
    path.write_text(json.dumps(GOOD))
    assert read_state(path, "unused", keys=("status",)) == GOOD
    with pytest.raises(EvoganError, match=r"damaged \(it has no 'epoch' entry\); fix it"):
        read_state(path, "fix it", keys=("status", "epoch"))


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_damaged_status_is_refused_not_taken_for_no_status(tmp_path, kind) -> None:
    run = tmp_path / "run"
    run.mkdir()
    damaged(run / STATUS, kind)
    before = snapshot(tmp_path)
    with pytest.raises(EvoganError) as info:
        check_resumable(run)
    message = str(info.value)
    assert message.startswith(f"{run / STATUS} is damaged ({DAMAGE[kind][1]}")
    assert message.endswith(f"resume it with --resume {run} --force, which rewrites it")
    with lifecycle(), pytest.raises(EvoganError, match="is damaged"):
        claim(run, resume=True)
    assert snapshot(tmp_path) == before  # no lock file left, the status as it was
    with lifecycle():  # --force: the user read the log
        claim(run, resume=True, force=True)
        assert read_status(run)["status"] == "running"
        settle_refused("wrong rank count")
    assert snapshot(tmp_path) == before  # the damaged bytes put back, the lock file gone


def test_the_cli_refuses_a_truncated_status_in_one_line_and_writes_nothing(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(REPO / "configs" / "regressor_ga.yaml", run / "config.yaml")
    damaged(run / STATUS, "truncated", {"status": "failed", "error": "disk full"})
    before = snapshot(tmp_path)
    line = one_error(evogan("evolve", "--resume", str(run)))
    assert line.startswith(f"evogan: error: {run / STATUS} is damaged (truncated")
    assert line.endswith(f"--resume {run} --force, which rewrites it")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["truncated", "empty", "wrong type"])
def test_a_damaged_run_manifest_is_named_on_resume(tmp_path, kind) -> None:
    from evogan.store.manifest import MANIFEST, check_resume_layout

    run = RunDir(tmp_path)
    damaged(run.file(MANIFEST), kind, {"layout": {"world_size": 2, "ranks_per_island": 1}})
    with pytest.raises(EvoganError) as info:
        check_resume_layout(run, 2, 1)
    assert str(info.value).startswith(f"{run.file(MANIFEST)} is damaged ({DAMAGE[kind][1]}")
    assert str(info.value).endswith("start a new run")
    run.write_json(MANIFEST, {"layout": []})
    with pytest.raises(EvoganError, match="it has no 'world_size' entry"):
        check_resume_layout(run, 2, 1)


@pytest.mark.parametrize("kind", ["truncated", "empty", "wrong type"])
def test_a_damaged_campaign_manifest_is_named_with_what_to_write_into_it(tmp_path, kind) -> None:
    from evogan.search.campaign import MANIFEST, Campaign

    damaged(tmp_path / MANIFEST, kind)
    before = snapshot(tmp_path)
    with pytest.raises(EvoganError) as info:
        Campaign(tmp_path).manifest()
    message = str(info.value)
    assert message.startswith(f"{tmp_path / MANIFEST} is damaged ({DAMAGE[kind][1]}")
    assert '{"backend": B, "world_size": N, "sessions": []}' in message
    with pytest.raises(EvoganError, match=rf"{tmp_path / MANIFEST} is damaged"):
        Campaign(tmp_path).start_session(2)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["truncated", "empty", "wrong type"])
def test_a_damaged_gan_checkpoint_marker_is_named(tmp_path, kind) -> None:
    from evogan.gan3d.training.checkpoint import MARKER, read_marker

    run = RunDir(tmp_path)
    damaged(run.file(MARKER), kind, {"epoch": 1, "files": ["checkpoints/a.h5"]})
    with pytest.raises(EvoganError) as info:
        read_marker(run)
    assert str(info.value).startswith(f"{run.file(MARKER)} is damaged ({DAMAGE[kind][1]}")
    assert str(info.value).endswith("start a new run (the checkpoint it names cannot be found)")


def test_a_damaged_outcome_of_a_final_retraining_is_named_and_trained_again(
    tmp_path, capsys
) -> None:
    from evogan.config import load_config
    from evogan.search.final import OUTCOME, _saved_outcomes

    config = load_config(REPO / "configs" / "arch_search_ga.yaml")
    record = {"seed": 5, "budget": config.budget.model_dump(mode="json"), "score": 0.25}
    record["failure"] = ""
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder in (good, bad):
        folder.mkdir()
        (folder / OUTCOME).write_text(json.dumps(record))
    damaged(bad / OUTCOME, "truncated", record)
    found = _saved_outcomes({(0, 0): good, (1, 0): bad}, [5], config)
    assert found == {(0, 0): (0.25, "")}
    note = capsys.readouterr().out
    assert f"search: note: {bad / OUTCOME} is damaged (truncated" in note
    assert note.strip().endswith("this re-training runs again")


# ---------------------------------------------------------------- journals and metrics


def _journal(path: Path) -> None:
    """A real Optuna journal holding one finished trial."""
    import optuna

    from evogan.search.journal import open_journal

    study = open_journal(path, 1)
    distribution = optuna.distributions.FloatDistribution(0.0, 1.0)
    trial = optuna.trial.create_trial(
        params={"x": 0.5}, distributions={"x": distribution}, value=1.0
    )
    study.add_trial(trial)


def _trials(path: Path) -> int:
    from evogan.search.journal import open_journal

    return len(open_journal(path, 1).get_trials(deepcopy=False))


@pytest.mark.parametrize("tail", [b'{"op_code": 5, "worker_id": "a', b'{"op_code": 5, "wor\n'])
def test_a_torn_journal_line_is_cut_off_after_keeping_the_file(tmp_path, capsys, tail) -> None:
    from evogan.search.campaign import MANIFEST, STUDY, Campaign

    path = tmp_path / STUDY
    _journal(path)
    whole = path.read_bytes()
    with open(path, "ab") as stream:
        stream.write(tail)
    torn = path.read_bytes()
    (tmp_path / MANIFEST).write_text(json.dumps({"backend": "tpe", "world_size": 1}))
    assert torn_tail(path, "unused") == len(whole)
    Campaign(tmp_path).check_journal()
    (backup,) = tmp_path.glob(f"{STUDY}.torn-*")
    assert backup.read_bytes() == torn and path.read_bytes() == whole
    note = capsys.readouterr().err
    assert note.startswith(f"evogan: note: {path} ended in a torn line") and backup.name in note
    _journal(path)  # appended after a whole line: Optuna reads every trial back
    assert _trials(path) == 2
    assert torn_tail(path, "unused") is None
    Campaign(tmp_path).check_journal()
    assert len(list(tmp_path.glob(f"{STUDY}.torn-*"))) == 1  # nothing more to repair


@pytest.mark.parametrize(
    ("backend", "fix"),
    [("ga", "delete it: the campaign rebuilds it"), ("tpe", "restore it from a backup, or delete")],
)
def test_a_journal_damaged_before_its_last_line_is_refused(tmp_path, backend, fix) -> None:
    from evogan.search.campaign import MANIFEST, STUDY, Campaign

    path = tmp_path / STUDY
    _journal(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b'{"op_code": \n', *lines[1:]]))
    (tmp_path / MANIFEST).write_text(json.dumps({"backend": backend, "world_size": 1}))
    before = snapshot(tmp_path)
    with pytest.raises(EvoganError) as info:
        Campaign(tmp_path).check_journal()
    message = str(info.value)
    assert message.startswith(f"{path} is damaged (line 2 of {len(lines) + 1} is not a JSON")
    assert fix in message
    assert snapshot(tmp_path) == before


def test_repair_keeps_the_whole_file_beside_it(tmp_path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b"')
    backup = repair_torn_tail(path, torn_tail(path, "unused"))
    assert backup.read_bytes() == b'{"a": 1}\n{"b"' and path.read_bytes() == b'{"a": 1}\n'


def test_appends_after_a_torn_metrics_line_start_on_a_new_line(tmp_path) -> None:
    for append in ("writer", "synced"):
        path = tmp_path / f"{append}.jsonl"
        path.write_text('{"kind": "epoch", "epoch": 0}\n{"kind": "epoch", "ep')
        if append == "writer":
            with MetricsWriter(path) as writer:
                writer.write({"kind": "epoch", "epoch": 1})
        else:
            append_synced(path, {"kind": "epoch", "epoch": 1}, kind="epoch")
        assert [r["epoch"] for r in read_metrics(path)] == [0, 1], append


# ---------------------------------------------------------------- symbolic links


def test_a_run_name_that_is_a_link_out_of_the_run_root_is_refused(tmp_path) -> None:
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / "mine").symlink_to(elsewhere)
    with pytest.raises(EvoganError) as info:
        RunDir.create("ga", root=root, name="mine")
    assert str(info.value) == (
        f"run directory {root / 'mine'} is a symbolic link to {elsewhere}, outside the run root "
        f"{root}; choose another run name, or give that directory itself with --run-dir "
        f"{elsewhere}"
    )
    assert list(elsewhere.iterdir()) == []
    (root / "inside").mkdir()
    (root / "alias").symlink_to(root / "inside")  # a link within the root is the root's own
    assert RunDir.create("ga", root=root, name="alias").path == root / "alias"


def _gan_commit(run: RunDir, serial: int, write: bool = True) -> list[str]:
    """One rank's checkpoint commit of ``serial`` (``write``: its file written first, as a
    trainer writes it)."""
    from evogan.distributed.mpi import MPI
    from evogan.gan3d.training.checkpoint import commit, rank_file

    files = [rank_file(serial, 0)]
    if write:
        run.file(files[0]).parent.mkdir(parents=True, exist_ok=True)
        run.file(files[0]).write_bytes(b"weights")
    commit(run, MPI.COMM_SELF, files, {"serial": serial, "epoch": serial, "world_size": 1})
    return files


def test_a_gan_commit_deletes_only_the_checkpoint_files_evogan_wrote(tmp_path) -> None:
    run = RunDir(tmp_path / "run")
    first = _gan_commit(run, 1)
    folder = run.file("checkpoints")
    (folder / "notes.txt").write_text("mine")
    (folder / "ckpt-000009-rank-00000.h5").write_text("not named by any marker")
    (folder / ".ckpt-000002-rank-00000.h5.k2x9_a.tmp").write_text("a killed write")
    second = _gan_commit(run, 2)
    assert not run.file(first[0]).exists() and run.file(second[0]).exists()
    assert sorted(p.name for p in folder.iterdir()) == [
        "ckpt-000002-rank-00000.h5",
        "ckpt-000009-rank-00000.h5",
        "notes.txt",
    ]


def test_a_gan_commit_refuses_a_checkpoint_folder_linked_out_of_the_run(tmp_path) -> None:
    run = RunDir(tmp_path / "run")
    _gan_commit(run, 1)
    outside = tmp_path / "scratch"
    run.file("checkpoints").rename(outside)
    (outside / "results.csv").write_text("someone else's")
    run.file("checkpoints").symlink_to(outside)
    before = snapshot(tmp_path)
    with pytest.raises(EvoganError) as info:
        _gan_commit(run, 2, write=False)
    link = run.file("checkpoints")
    assert str(info.value).startswith(
        f"{link} is a symbolic link to {outside}, outside the run directory {run.path}; "
    )
    assert str(info.value).endswith(
        "replace the link by a folder (--run-dir puts a whole run elsewhere)"
    )
    assert snapshot(tmp_path) == before
    from evogan.gan3d.training.checkpoint import save_rank

    with pytest.raises(EvoganError, match="is a symbolic link to"):
        save_rank(run, "checkpoints/ckpt-000002-rank-00000.h5", None, {}, {})  # type: ignore
    assert snapshot(tmp_path) == before


def test_island_checkpoints_in_a_folder_linked_out_of_the_run_are_refused(tmp_path) -> None:
    from evogan.store.checkpoint import checkpoint_path, generations, prune

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for generation in (1, 2, 3):
        (outside / f"gen-{generation:08d}.h5").write_text("someone else's")
    (run / "checkpoints" / "island-0000").symlink_to(outside)
    for call in (
        lambda: generations(run, 0),
        lambda: prune(run, 0, keep=1),
        lambda: checkpoint_path(run, 0, 4),
    ):
        with pytest.raises(EvoganError, match=r"island-0000 is a symbolic link to .*outside"):
            call()
    assert len(list(outside.iterdir())) == 3


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path) -> None:
    run, target = tmp_path / "run", tmp_path / "precious.txt"
    run.mkdir()
    target.write_text("keep me")
    (run / ".lock").symlink_to(target)
    with lifecycle(), pytest.raises(EvoganError, match=r"\.lock is a symbolic link; .*rm "):
        claim(run, resume=True)
    assert target.read_text() == "keep me"


def test_a_leftover_training_directory_is_cleared_only_of_what_evogan_writes(tmp_path) -> None:
    from evogan.search.members import clear_workdir

    workdir = tmp_path / "g0001-i00"
    (workdir / "member-0").mkdir(parents=True)
    (workdir / "rungs").mkdir()
    (workdir / "outcome.json").write_text("{}")
    (workdir / "thesis.tex").write_text("mine")
    with pytest.raises(EvoganError, match=r"holds 'thesis\.tex', which evogan did not write"):
        clear_workdir(workdir)
    assert (workdir / "thesis.tex").exists() and (workdir / "member-0").is_dir()
    (workdir / "thesis.tex").unlink()
    clear_workdir(workdir)
    assert not workdir.exists()
    (tmp_path / "real").mkdir()
    workdir.symlink_to(tmp_path / "real")
    with pytest.raises(EvoganError, match="g0001-i00 is a symbolic link; evogan deletes"):
        clear_workdir(workdir)
    assert (tmp_path / "real").is_dir()


# ---------------------------------------------------------------- refused runs


def test_a_refused_new_run_removes_only_what_it_wrote(tmp_path) -> None:
    with lifecycle():
        run = RunDir.create("ga", path=tmp_path / "a" / "b" / "run")
        run.write_config("task: regressor\n")
        run.write_json("manifest.json", {"layout": {}})
        settle_refused("ranks_per_island does not divide the ranks")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "given").mkdir()
    with lifecycle():
        run = RunDir.create("ga", path=tmp_path / "given")
        settle_refused("bad layout")
    assert list((tmp_path / "given").iterdir()) == []
    with lifecycle():  # a file evogan did not write: nothing is deleted, the run is marked failed
        run = RunDir.create("ga", path=tmp_path / "kept")
        (run.path / "notes.txt").write_text("mine")
        settle_refused("bad layout")
    assert sorted(p.name for p in run.path.iterdir()) == [".lock", "notes.txt", STATUS]
    assert read_status(run.path)["status"] == "failed"


def test_a_refused_resume_puts_back_the_lock_file_and_status_byte_for_byte(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    write_status(run, "stopped")
    (run / ".lock").write_bytes(b"pid 12 on \xff\xfenode\n")  # a lock of some old process
    before = snapshot(tmp_path)
    with lifecycle():
        claim(run, resume=True)
        assert (run / ".lock").read_bytes() != before["run/.lock"]
        settle_refused("resume it with mpirun -n 2")
    assert snapshot(tmp_path) == before


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize(("ranks", "bad"), [(2, 3), (3, 2)])
def test_a_gan_run_refused_for_its_rank_layout_leaves_the_directory_as_it_was(
    tmp_path, ranks, bad
) -> None:
    """A new run directory, folders above it included, goes again. (A refusal in a given,
    existing folder empties it and keeps it: test_a_refused_new_run_removes_only_what_it_wrote.)"""
    named = tmp_path / "new" / "run"
    args = ["-m", "evogan", "train", GAN_CONFIG, "--run-dir", str(named)]
    args += ["--set", "trainer.mode=arar", "--set", f"trainer.group_size={bad}"]
    # one step, should the refusal ever not come
    args += ["--set", "trainer.epochs=1", "--set", "trainer.steps_per_epoch=1"]
    done = mpirun(ranks, args)
    assert done.returncode == EXIT_USER_ERROR, done.stderr[-3000:]
    assert f"got group_size = {bad} with {ranks} ranks per island" in done.stderr
    assert snapshot(tmp_path) == {}


@pytest.mark.mpi
@pytest.mark.slow
def test_a_refused_gan_resume_leaves_the_run_as_it_was_and_the_right_one_runs(
    tmp_path, capsys, tiny_gan_run
) -> None:
    """The one-rank refusal in this process; the others under mpirun."""
    run = tmp_path / "run"
    shutil.copytree(tiny_gan_run, run, symlinks=True)
    before = snapshot(tmp_path)
    longer = ["--set", "trainer.epochs=3"]
    assert main(["train", "--resume", str(run), *longer]) == EXIT_USER_ERROR
    (line,) = capsys.readouterr().err.strip().splitlines()
    again = f"resume it with mpirun -n 2 evogan train --resume {run} (got 1)"
    assert f"must be resumed on as many; {again}" in line
    assert snapshot(tmp_path) == before
    outside = tmp_path / "scratch"
    (run / "checkpoints").rename(outside)
    (outside / "results.csv").write_text("someone else's")
    (run / "checkpoints").symlink_to(outside)
    linked = snapshot(tmp_path)
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run), *longer])
    line = one_error(done)
    assert f"{run / 'checkpoints'} is a symbolic link to {outside}, outside the run" in line
    assert snapshot(tmp_path) == linked
    (run / "checkpoints").unlink()
    outside.rename(run / "checkpoints")
    (run / "checkpoints" / "results.csv").unlink()
    done = mpirun(2, ["-m", "evogan", "train", "--resume", str(run), *longer])
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((run / "checkpoint.json").read_text())["epoch"] == 3
    assert read_status(run)["status"] == "finished"


def test_the_slurm_templates_refuse_a_damaged_status_without_a_traceback(tmp_path) -> None:
    from tests.test_slurm_templates import run_or_resume

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("task: regressor\n")
    damaged(run / STATUS, "truncated")
    done = run_or_resume(tmp_path, "evolve", "unused.yaml", str(run))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "has status 'damaged'" in done.stderr and f"--resume {run} --force" in done.stderr
