"""dlperf's own results as a table for other tools: CSV or JSON text, or Parquet bytes, one
row per result (`dlperf.rows`, the row the results index and the site read too). Renderers
only; the CLI writes."""

from __future__ import annotations

import importlib.util

from dlperf import DlperfError
from dlperf.schema import Result

PARQUET_MISSING = (
    "--format parquet needs pyarrow, which dlperf does not install (CSV needs nothing more): "
    "pip install pyarrow"
)


def results_frame(results: list[Result]):  # -> pandas.DataFrame
    """One row per result (`dlperf.rows`), typed."""
    from dlperf.rows import result_row, rows_frame

    return rows_frame([result_row(r) for r in results])


def results_csv(results: list[Result]) -> str:
    # Floats are written in full (repr), so reading the CSV back gives the stored values.
    return results_frame(results).to_csv(index=False, lineterminator="\n")


def results_parquet(results: list[Result]) -> bytes:
    # pyarrow is ~170 MB installed and only this format needs it: the user's choice, not a
    # host dependency.
    if importlib.util.find_spec("pyarrow") is None:
        raise DlperfError(PARQUET_MISSING)
    return results_frame(results).to_parquet(None, engine="pyarrow", index=False)


def results_json(results: list[Result]) -> str:
    """The same rows as a JSON array of objects, missing values null. Not pandas' to_json: it
    rounds floats to at most 15 digits, and these are written in full as in the CSV."""
    import json

    frame = results_frame(results)
    rows = frame.astype(object).where(frame.notna(), None).to_dict(orient="records")
    return json.dumps(rows, indent=2) + "\n"
