"""dlperf's own words for bad input: a near miss named ("did you mean pytorch?"), and a value
pydantic refused said as a sentence that names the option, the value, what it takes and how to
fix it, never pydantic's "Input should be ..." or "Value error, ...".

Every refusal of a name (a framework, a model, a --set key, a preset, a choice of an option)
says its near miss through `did_you_mean`; every ValidationError of something a user typed
becomes sentences through `value_problem`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

MAX_SHOWN = 40  # characters of a refused value repeated back


def close_match(value: str, choices: Iterable[str]) -> str | None:
    """The one choice `value` most likely meant (a typo, a letter case, a letter left out),
    or None when none is close."""
    options = [str(c) for c in choices]
    folded = {c.casefold(): c for c in options}
    if str(value).casefold() in folded:
        return folded[str(value).casefold()]
    found = difflib.get_close_matches(str(value), options, n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """ " (did you mean CHOICE?)" to follow the refused value, or "" when no choice is close."""
    match = close_match(value, choices)
    return f" (did you mean {match}?)" if match is not None and match != value else ""


def either(choices: Iterable[str]) -> str:
    """Choices as a sentence says them: "a, b or c"."""
    names = [str(c) for c in choices]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def shown(value: Any) -> str:
    """A refused value as the user typed it: a number as a number (2.0 as 2), text quoted; cut
    short."""
    if isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, (int, bool)):
        text = str(value)
    else:
        text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def value_problem(name: str, error: Mapping[str, Any], choices: Iterable[str] = ()) -> str:
    """One pydantic error about a value the user gave as `name` (an option such as
    --batch-size, or a sweep key) as dlperf's sentence: the option, the value, what it takes
    and the fix. `choices`: the values a choice option takes (its Literal)."""
    kind, ctx, value = error.get("type", ""), error.get("ctx") or {}, error.get("input")
    said = f"{name} {shown(value)}"
    choices = [str(c) for c in choices]
    if choices:
        near = close_match(str(value), choices)
        fix = f"did you mean {name} {near}?" if near else "give one of them"
        return f"{name} takes {either(choices)}, not {shown(value)}; {fix}"
    if kind == "greater_than_equal":
        least = shown(ctx["ge"])
        return f"{said} is below {least}: give {name} {least} or more"
    if kind == "greater_than":
        return f"{said} is too small: give {name} a number above {shown(ctx['gt'])}"
    if kind == "less_than_equal":
        most = shown(ctx["le"])
        return f"{said} is above {most}, the most dlperf takes: give {name} {most} or less"
    if kind == "less_than":
        return f"{said} is too large: give {name} a number below {shown(ctx['lt'])}"
    if kind == "finite_number":
        return f"{said} is not a finite number: give {name} a finite number"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{said} is not a whole number: give {name} a whole number, such as 8"
    if kind in ("float_parsing", "float_type"):
        return f"{said} is not a number: give {name} a number, such as 2.5"
    if kind in ("bool_parsing", "bool_type"):
        return f"{said} is not true or false: give {name} true or false"
    if kind == "literal_error":
        return f"{name} takes {ctx.get('expected', '')}, not {shown(value)}; give one of them"
    if kind == "missing":
        return f"{name} is missing: give it"
    message = str(error.get("msg", "")).removeprefix("Value error, ")
    if kind == "value_error" or not message[:1].isupper():
        return message  # dlperf's own validators' sentences, whole
    return f"{said}: {message[:1].lower()}{message[1:]}"


def settings_problems(
    errors: Iterable[Mapping[str, Any]], names: Mapping[str, str] | None = None
) -> str:
    """Pydantic's errors about a benchmark's settings (`BenchmarkSpec`) as one message: each
    setting called by the name the user gave it (`names`: field -> option or key; a field it
    lacks, by the option named after it: --batch-size for batch_size), a check of several
    settings together (no field) by its own sentence."""
    said = []
    for error in errors:
        field = str(error["loc"][0]) if error.get("loc") else ""
        if not field:
            said.append(str(error.get("msg", "")).removeprefix("Value error, "))
            continue
        name = (names or {}).get(field) or "--" + field.replace("_", "-")
        said.append(value_problem(name, error))
    return "; ".join(dict.fromkeys(said))
