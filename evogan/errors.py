"""User-facing errors: one line that names the problem and the fix."""


class EvoganError(Exception):
    """A problem the user can fix (bad config, bad file, impossible setting).

    The CLI prints it as one line without a traceback and exits non-zero.
    """


class ConfigError(EvoganError):
    """A config key is unknown, has the wrong type, or is out of range."""


class DataError(EvoganError):
    """An input file is missing, unreadable, or does not hold calorimeter showers."""


EXIT_FINISHED = 0
EXIT_FAILURE = 1
EXIT_USER_ERROR = 2
EXIT_STOPPED = 75
"""Stopped by SIGTERM/SIGINT after a checkpoint: resume me (sysexits' EX_TEMPFAIL, so a Slurm
job script can requeue on it and tell it from success and from failure)."""


class RunStopped(Exception):
    """A run stopped on a signal after writing its checkpoint.

    Raised on every rank once the ranks agreed to stop; the CLI prints the resume command once
    and exits with :data:`EXIT_STOPPED`.
    """

    def __init__(self, resume_command: str) -> None:
        super().__init__(f"stopped by a signal; resume with: {resume_command}")
        self.resume_command = resume_command
