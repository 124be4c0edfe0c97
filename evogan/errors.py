"""User-facing errors: one line that names the problem and the fix."""


class EvoganError(Exception):
    """A problem the user can fix (bad config, bad file, impossible setting).

    The CLI prints it as one line without a traceback and exits non-zero.
    """


class ConfigError(EvoganError):
    """A config key is unknown, has the wrong type, or is out of range."""


class DataError(EvoganError):
    """An input file is missing, unreadable, or does not hold calorimeter showers."""
