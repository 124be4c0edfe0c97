"""Every command in the fenced bash blocks of README.md and docs/getting-started.md (its
workflows in one screen), run as written at tiny size.

The commands run in order in one scratch directory (a copy of ``configs/``), as a user would
type them: sizes shrink only through ``--set`` on configs (events, epochs, candidates, and the
3DGAN spec and search space of ``configs/*_tiny.yaml``) and size options (``--events``),
``mpirun -n N`` runs on 2 ranks, ``populations/ga-...`` means the newest matching run and globs
expand as a shell would. An ``evogan`` line runs in this process through
:func:`evogan.cli.main` (what the ``evogan`` script calls); ``mpirun`` lines run under a real
launcher. A ``--resume RUN`` line is run after its run was stopped by SIGTERM (exit 75), as at
the end of an allocation, and must then finish (exit 0): the line that made RUN runs as that
stopped run where no line between reads it, else it runs once more to be stopped. Lines that
cannot run here are skipped by a named rule, each reported as a skipped test with its reason.

The commands in docs/ are checked without running them (they are the README's workflows at
cluster size, or walkthroughs): each must parse, keep the one ``--resume RUN`` grammar, and
name configs and ``--set`` keys that exist.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from evogan.cli import build_parser
from evogan.config import load_config
from evogan.errors import EXIT_STOPPED, EvoganError
from tests.conftest import REPO, evogan_here, mpi_env, rank_pids, run_launched, start_launched

README = REPO / "README.md"
GETTING_STARTED = REPO / "docs" / "getting-started.md"
RANKS = 2
TIMEOUT_S = 300

SKIP_RULES: tuple[tuple[str, str], ...] = (
    (r"^python3? -m venv ", "creates the virtual environment these tests already run in"),
    (r"^(\.|source) \S*activate$", "activates that environment"),
    (r"\bpip install\b", "installs packages from the network"),
    (r"^python -m pytest\b", "is this test suite itself"),
    (r"^sbatch\b", "needs a Slurm cluster"),
    (r"(^|\s)/(eos|afs|cvmfs|gpfs)/", "names a file on a cluster file system"),
    (r"^mkdocs serve\b", "serves the docs site until stopped"),
    (r"^mkdocs build\b", "is tests/test_docs_site.py's strict build of the site"),
)


def _tiny_search() -> tuple[str, ...]:
    """The 3DGAN network and search space at test size (configs/*_tiny.yaml): one training
    step of the shipped 1.37 M-parameter generator takes tens of seconds on a CPU."""
    spec = yaml.safe_load((REPO / "configs" / "gan3d_tiny.yaml").read_text())["spec"]
    space = yaml.safe_load((REPO / "configs" / "arch_search_tiny.yaml").read_text())["space"]
    return f"spec={json.dumps(spec)}", f"space={json.dumps(space)}"


TINY_SPEC, TINY_SPACE = _tiny_search()
# Tiny sizes per config task, appended as --set to every command that names a config.
TINY: dict[str, tuple[str, ...]] = {
    "regressor": (
        "data.synthetic.events=300",
        "data.train_events=200",
        "data.test_events=60",
        "ga.epochs=2",
        "ga.batch_size=64",
        "ga.schedule_milestones=[1]",
        "train.epochs=2",
        "train.batch_size=64",
    ),
    "gan3d": (
        TINY_SPEC,
        "data.synthetic.events=40",
        "data.synthetic.energy_range=[10.0,200.0]",
        "trainer.epochs=1",
        "trainer.steps_per_epoch=1",
        "trainer.batch_size=4",
    ),
    "search": (
        "base=null",
        TINY_SPEC,
        TINY_SPACE,
        "candidates=2",
        "ranks_per_group=1",
        "data.synthetic.events=40",
        "data.synthetic.energy_range=[10.0,200.0]",
        "trainer.batch_size=4",
        "budget.amount=1",
        "fitness.members=1",
        "fitness.test_events=16",
        "fitness.energy_bins=2",
        "ga.population=2",
        "ga.offspring=2",
        "optuna.startup_trials=2",
    ),
}
# A run that is to be stopped must still be running when the signal comes.
LONG: dict[str, tuple[str, ...]] = {
    "regressor": ("ga.epochs=100000", "checkpoint.every=2"),
    "search": ("candidates=50",),
}
SIZE_OPTIONS = {"--events": "64"}  # command-line sizes (data synth, generate)
SET_SIZES = {"trainer.group_size": str(RANKS)}  # README --set values that need more ranks


def readme_commands(text: str) -> list[str]:
    """Command lines of the fenced bash blocks: comments dropped, ``&&`` chains split."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            commands.extend(part.strip() for part in line.split(" && ") if part.strip())
    return commands


def skip_reason(command: str) -> str | None:
    return next((why for rule, why in SKIP_RULES if re.search(rule, command)), None)


@dataclass
class Outcome:
    command: str
    ran: list[str] = field(default_factory=list)  # what was executed, after substitution
    skipped: str | None = None
    error: str | None = None  # None: every execution exited as expected


class Workflow:
    """Runs README commands one after another in ``root``."""

    def __init__(self, root: Path, commands: list[str]) -> None:
        self.root = root
        self.commands = commands
        shutil.copytree(REPO / "configs", root / "configs")
        self.env = mpi_env()
        self.env.update(EVOGAN_CACHE_DIR=str(root / "cache"), MPLBACKEND="Agg")
        self.env.pop("EVOGAN_POPULATIONS", None)
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"
        self.done: list[str] = []
        self.created: list[tuple[list[str], str, Path]] = []  # (argv, task, run dir) in order
        self.stopped: dict[str, tuple[Path, str]] = {}  # RUN as a later line writes it

    # ---------------------------------------------------------------- commands
    def run(self, index: int) -> Outcome:
        command = self.commands[index]
        outcome = Outcome(command)
        outcome.skipped = skip_reason(command)
        if outcome.skipped is None and command in self.done:
            outcome.skipped = "is the same command as one run above"
        if outcome.skipped is not None:
            return outcome
        self.done.append(command)
        try:
            argv, task = self.prepare(command)
            if "--resume" in argv:
                self.stop_then_resume(argv, outcome, _resume_target(command))
            elif (resumed_later := self.resumed_later(index)) is not None:
                # the run a later line resumes: this line makes it stopped, that line ends it
                stopped = self.stop(argv + _sets(LONG[task]), task, self.runs(), outcome)
                if stopped is not None:
                    self.stopped[resumed_later] = (stopped, task)
            else:
                before = self.runs()
                self.execute(argv, outcome, expect=0)
                for path in sorted(self.runs() - before):
                    self.created.append((argv, task, path))
        except LookupError as exc:
            outcome.error = str(exc)
        return outcome

    def resumed_later(self, index: int) -> str | None:
        """RUN of the first later ``--resume RUN`` line of this line's command when only this
        line's run can be meant and no line between reads it: RUN is this line's ``--run-dir``,
        or a ``...`` pattern where this line names none and no line between runs the same
        command."""
        words = shlex.split(self.commands[index])
        command = _subcommand(words)
        run_dir = words[words.index("--run-dir") + 1] if "--run-dir" in words else None
        between: list[str] = []
        for later in self.commands[index + 1 :]:
            other = _subcommand(shlex.split(later))
            if skip_reason(later) is None and other is not None:
                target = _resume_target(later)
                if target is not None and other == command:
                    break
                between.append(later)
        else:
            return None
        if target != run_dir and not (run_dir is None and target.endswith("...")):
            return None
        stem = target.removesuffix("...")
        same = any(_subcommand(shlex.split(line)) == command for line in between)
        return (
            None if any(stem in line for line in between) or (run_dir is None and same) else target
        )

    def prepare(self, command: str) -> tuple[list[str], str]:
        """The command at tiny size, as an argv, and the task of the config it names."""
        words = shlex.split(command)
        prefix = []
        if words[0] == "mpirun":
            launcher = shutil.which("mpirun", path=self.env["PATH"]) or "mpirun"
            prefix = [launcher, "-n", str(RANKS), "--oversubscribe"]
            words = words[words.index("-n") + 2 :]
        if words[0] != "evogan":
            raise LookupError(f"no rule runs {words[0]!r}; add a skip rule or a runner for it")
        args = self.substitute(words[1:])
        task = ""
        for word in args:
            if word.endswith(".yaml") and (self.root / word).is_file() and "--resume" not in args:
                task = yaml.safe_load((self.root / word).read_text()).get("task", "regressor")
        extra = [item for value in TINY.get(task, ()) for item in ("--set", value)]
        return [*prefix, "evogan", *args, *extra], task

    def substitute(self, args: list[str]) -> list[str]:
        out: list[str] = []
        for index, word in enumerate(args):
            previous = args[index - 1] if index else ""
            if previous == "--set" and word.partition("=")[0] in SET_SIZES:
                word = f"{word.partition('=')[0]}={SET_SIZES[word.partition('=')[0]]}"
            elif previous in SIZE_OPTIONS:
                word = SIZE_OPTIONS[previous]
            word = self.resolve(word)
            if any(c in word for c in "*?["):
                matches = sorted(glob.glob(word, root_dir=self.root))
                out.extend(matches or [word])
            else:
                out.append(word)
        return out

    def resolve(self, word: str) -> str:
        """``populations/gan3d-.../best_model.h5``: the newest run matching ``gan3d-*``."""
        match = re.search(r"([\w./-]*?)\.\.\.", word)
        if match is None:
            return word
        found = [p for p in glob.glob(match.group(1) + "*", root_dir=self.root) if "..." not in p]
        if not found:
            raise LookupError(f"{word}: no run matches {match.group(1)}* (made by no line above)")
        newest = max(found, key=lambda p: (self.root / p).stat().st_mtime)
        return word.replace(match.group(0), newest)

    def runs(self) -> set[Path]:
        folder = self.root / "populations"
        return set(folder.iterdir()) if folder.is_dir() else set()

    # ---------------------------------------------------------------- execution
    def execute(self, argv: list[str], outcome: Outcome, expect: int) -> None:
        outcome.ran.append(shlex.join(argv))
        if argv[0] == "evogan":
            result = evogan_here(*argv[1:], cwd=self.root, env=self.env)
        else:
            result = run_launched(argv, env=self.env, cwd=self.root, timeout=TIMEOUT_S)
        if result.returncode != expect and outcome.error is None:
            outcome.error = _failure(argv, result.returncode, expect, result.stdout, result.stderr)

    def stop_then_resume(self, argv: list[str], outcome: Outcome, target: str | None) -> None:
        """The resume line, shortened by resume-safe --set, must exit 0 on a run stopped with
        SIGTERM once it had made progress (exit 75): the one the line that made RUN left
        stopped (:meth:`resumed_later`), or else that line run again and stopped."""
        if target in self.stopped:
            stopped, task = self.stopped.pop(target)
        else:
            run = (self.root / argv[argv.index("--resume") + 1]).resolve()
            origin = next((o for o in reversed(self.created) if o[2].resolve() == run), None)
            if origin is None:
                raise LookupError(f"--resume {run.name}: no line above made this run")
            origin_argv, task, made = origin
            if "--run-dir" in origin_argv:  # the stopped run takes the same name
                made.rename(made.with_name(made.name + "-finished"))
            stopped = self.stop(origin_argv + _sets(LONG[task]), task, self.runs(), outcome)
            if stopped is None:
                return
        run_index = argv.index("--resume") + 1
        argv = [*argv[:run_index], str(stopped.relative_to(self.root)), *argv[run_index + 1 :]]
        self.execute(argv + _sets(_shorter(task, stopped)), outcome, expect=0)

    def stop(self, argv: list[str], task: str, before: set[Path], outcome: Outcome) -> Path | None:
        outcome.ran.append(shlex.join(argv) + "   (then SIGTERM)")
        if argv[0] == "evogan":
            process = subprocess.Popen(
                argv,
                cwd=self.root,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        else:
            process = start_launched(argv, env=self.env, cwd=self.root)
        deadline = time.monotonic() + TIMEOUT_S
        run = None
        while time.monotonic() < deadline and process.poll() is None:
            new = sorted(self.runs() - before)
            run = new[0] if new else None
            if run is not None and _progressed(task, run):
                break
            time.sleep(0.2)
        for pid in rank_pids(process.pid) if argv[0] != "evogan" else [process.pid]:
            os.kill(pid, signal.SIGTERM)  # as Slurm does at the end of an allocation: every rank
        out, err = process.communicate(timeout=TIMEOUT_S)
        said = f"evogan {argv[argv.index('evogan') + 1]} --resume" in out + err
        if process.returncode != EXIT_STOPPED or run is None or not said:
            outcome.error = _failure(argv, process.returncode, EXIT_STOPPED, out, err) + (
                "" if said else " (no resume command printed)"
            )
            return None
        return run


def _subcommand(words: list[str]) -> str | None:
    """The evogan command of a line's words (``evolve`` in ``mpirun -n 4 evogan evolve ...``)."""
    return words[words.index("evogan") + 1] if "evogan" in words[:-1] else None


def _resume_target(command: str) -> str | None:
    """RUN of a ``--resume RUN`` line, as written."""
    words = shlex.split(command)
    return words[words.index("--resume") + 1] if "--resume" in words else None


def _sets(values) -> list[str]:
    return [item for value in values for item in ("--set", value)]


def _progressed(task: str, run: Path) -> bool:
    """A run worth stopping: a metrics line written (regressor) or a candidate trained."""
    if task == "search":
        return any(r.get("status") != "invalid" for r in _rows(run / "table"))
    return any(_rows(path) for path in run.rglob("metrics.jsonl"))


def _shorter(task: str, run: Path) -> list[str]:
    """Resume-safe --set that lets a stopped run finish soon: one more epoch or candidate."""
    if task == "search":
        trained = [r for r in _rows(run / "table") if r.get("status") != "invalid"]
        return [f"candidates={len(trained) + 1}"]
    epochs = [r.get("epoch", 0) for path in run.rglob("metrics.jsonl") for r in _rows(path)]
    return [f"ga.epochs={max(epochs, default=0) + 2}"]


def _rows(path: Path) -> list[dict]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path] if path.is_file() else []
    rows = []
    for file in files:
        for line in file.read_text(errors="replace").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return rows


def _failure(argv: list[str], code: int | None, expect: int, out: str, err: str) -> str:
    tail = "\n".join((out + err).strip().splitlines()[-15:])
    return f"`{shlex.join(argv)}` exited {code}, expected {expect}:\n{tail}"


COMMANDS = readme_commands(README.read_text() + GETTING_STARTED.read_text())


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[Outcome]:
    workflow = Workflow(tmp_path_factory.mktemp("readme"), COMMANDS)
    return [workflow.run(index) for index in range(len(COMMANDS))]


def test_readme_blocks_are_found() -> None:
    assert len(COMMANDS) >= 10
    ran = [c for c in COMMANDS if skip_reason(c) is None]
    assert any(c.startswith("mpirun ") for c in ran)
    assert any("--resume" in c for c in ran)


# The first of these tests runs the whole README (about 2.5 CPU-minutes on 2 cores); the
# limit leaves room for a busy machine.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=lambda i: COMMANDS[i][:70])
@pytest.mark.slow
def test_readme_command(outcomes: list[Outcome], index: int) -> None:
    outcome = outcomes[index]
    if outcome.skipped is not None:
        pytest.skip(f"{outcome.command!r} {outcome.skipped}")
    assert outcome.error is None, outcome.error


def docs_commands() -> list[tuple[str, list[str]]]:
    """``(doc, evogan arguments)`` of every evogan command line in the fenced blocks of docs/
    (launchers dropped; argument synopses with ``[...]`` are not commands). docs/history/ is
    left out: it records commands as they were run on their day."""
    found = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        doc = str(path.relative_to(REPO / "docs"))
        if doc.startswith("history/"):
            continue
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip().removesuffix("&").strip()
                command = re.match(r"(mpirun|srun|evogan) ", line) and "[" not in line
                words = shlex.split(line) if command else []
                if words and words[0] in ("mpirun", "srun") and "evogan" in words:
                    words = words[words.index("evogan") :]
                if words and words[0] == "evogan":
                    found.append((doc, words[1:]))
    return found


DOCS_COMMANDS = docs_commands()


@pytest.mark.parametrize(
    ("doc", "args"), DOCS_COMMANDS, ids=[f"{d}: {' '.join(a)[:60]}" for d, a in DOCS_COMMANDS]
)
def test_docs_command_parses_with_existing_configs_and_keys(doc: str, args: list[str]) -> None:
    try:
        parsed = build_parser().parse_args(args)
    except SystemExit:
        pytest.fail(f"{doc}: `evogan {shlex.join(args)}` is refused by the argument parser")
    config = getattr(parsed, "config", None)
    if getattr(parsed, "resume", None) is not None:
        assert config is None, f"{doc}: --resume RUN takes no CONFIG: evogan {shlex.join(args)}"
    elif config is not None and str(config).startswith("configs/"):
        try:
            load_config(REPO / config, parsed.overrides)
        except EvoganError as exc:
            pytest.fail(f"{doc}: `evogan {shlex.join(args)}`: {exc}")
