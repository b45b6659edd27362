"""Results whose every string field holds hostile text: Markdown links and images to a local
server, raw HTML and script, a bare URL, table pipes, U+2028/U+2029, ESC sequences (clear
screen, OSC 52 clipboard write), a C1 control, Plotly's `%{...}`, matplotlib's `$...$`.

Each string becomes `payload(tag)`, the tag naming the field and a hash of the value it
replaced: values that were equal stay equal (the same machine, framework, model), so the
results keep their shape (sections, tables, ablations, histories) with every word hostile.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import ValidationError

from dlperf.schema import Result

OPEN, CLOSE = "⟦", "⟧"  # a payload's ends: a table cell holding one holds both
ESC_SEQUENCES = ("\x1b[2J", "\x1b[H", "\x1b]52;c;cm0gLXJmIH4=\x07", "\x9b31m")


def payload(tag: str, port: int) -> str:
    base = f"http://127.0.0.1:{port}"
    return (
        f"{OPEN}{tag} ![img]({base}/img-{tag}.png) [link]({base}/link-{tag}) "
        f'<img src="{base}/raw.png" onerror="window.__pwned=1"> <script>window.__pwned=1</script> '
        f"<{base}/autolink> {base}/bare www.example.com &lt;b&gt; | `tick` *em* _u_ ~~s~~ "
        f"a\u2028b|c\u2029d {''.join(ESC_SEQUENCES)} %{{y}} $\\undefinedmacro{{$ {tag}{CLOSE}"
    )


def _tag(path: list[str], original: str) -> str:
    return ".".join(path) + "#" + hashlib.sha1(original.encode()).hexdigest()[:6]


def poison(result: Result, port: int) -> tuple[dict, list[str]]:
    """`result` as JSON with every string the schema lets be any text replaced by a payload,
    and a payload setting (key and value) added to its options; the poisoned fields' paths."""
    data = json.loads(result.model_dump_json())
    taken: list[str] = []

    def visit(node: dict | list, path: list[str]) -> None:
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for key, value in items:
            where = [*path, str(key)]
            if isinstance(value, dict | list):
                visit(value, where)
            elif isinstance(value, str):
                node[key] = payload(_tag(where, value), port)  # type: ignore[index]
                try:
                    Result.model_validate(data)
                    taken.append(".".join(where))
                except ValidationError:  # an enum or a checked choice (mode, device...)
                    node[key] = value  # type: ignore[index]

    visit(data, [])
    data["spec"]["options"][payload("spec.options.key", port)] = payload("spec.options", port)
    Result.model_validate(data)
    return data, taken


def write_poisoned(results: list[Result], folder: Path, port: int) -> list[str]:
    """Write each poisoned result under `folder` (names of our own: the ids are payloads);
    returns every poisoned field's path."""
    fields: set[str] = set()
    for i, result in enumerate(results):
        data, taken = poison(result, port)
        fields.update(taken)
        path = folder / f"poisoned-{i:02d}" / f"{i:02d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n")
    return sorted(fields)
