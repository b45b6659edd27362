"""dlperf: measure deep-learning framework performance fairly and reproducibly."""

__version__ = "0.1.0"


class DlperfError(Exception):
    """An error the user can act on; the CLI prints the message without a traceback, exit 1."""
