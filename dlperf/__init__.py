"""dlperf: measure deep-learning framework performance fairly and reproducibly."""

__version__ = "0.1.0"


class DlperfError(Exception):
    """An error the user can act on; the CLI prints the message without a traceback and exits
    with `exit_code`: 1 (bad input, nothing ran) unless the error says otherwise."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NothingComparable(DlperfError):
    """A comparison found nothing to compare (no benchmark in common, other machines): exit
    code 3, so that a check that compared nothing never passes."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=3)
