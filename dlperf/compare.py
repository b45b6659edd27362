"""`dlperf compare A B`: benchmark by benchmark, on the same machine, did B get faster or slower
than A, and what else differs between them?

Results are paired by benchmark + machine (`dlperf.identity`): the same benchmark with other
settings (an ablation, `--set channels_last=1`) is a pair whose settings differ, named in the
row; environment differences (framework, Python, packages, dlperf commit) are listed too. Two
machines are never compared unless asked (`--across-machines`), and then the machines are
printed first; one machine is the same recorded hardware (`identity.same_machine`), not the
same id, and a machine whose hardware was not recorded is one only with itself. Where two
machines have the same label, the output names them with their ids (`identity.machine_names`).
A comparison that paired nothing is not a pass: it says why (exit code 3). Published references
(MLPerf results imported by `dlperf parse mlperf-training`) are other people's systems: left out
unless asked (`include_references`), and counted so the output can say so.

Each side's number is the median of its ok repeats. A change counts only when it is larger
than the threshold (default 5 %) AND it is significant by `stats.significance` (the exact
two-sided Mann-Whitney U test at alpha 0.05, or, with too few repeats for it, the 95 % Student
t intervals of the means not overlapping). A significant drop beyond the threshold is a
regression. A change beyond the threshold that is not significant ("within noise") says why:
how many repeats, how noisy, and how many repeats a side would show a change of the threshold's
size on that noise (`stats.repeats_to_detect`), or that these counts cannot show any change.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlperf import DlperfError
from dlperf.identity import (
    Machine,
    describe,
    differences,
    identity_of,
    machine_names,
    machine_of,
    parameters_of,
    same_machine,
    settings_label,
)
from dlperf.printable import figure
from dlperf.published import is_published_reference
from dlperf.resultio import load_result
from dlperf.rows import metric_values, result_row
from dlperf.schema import Result
from dlperf.stats import ALPHA, REPEATS_SEARCHED, Detection, judge, repeats_to_detect
from dlperf.store import ResultStore

REGRESSION = 2  # exit codes of `dlperf compare` (0: no significant regression)
NOTHING_COMPARABLE = 3


@dataclass(frozen=True)
class Row:
    """One pair: A's and B's result of one benchmark (on one machine, unless compared across
    machines), how B's median changed and whether it counts."""

    benchmark: str
    machine: str  # A's machine label (B's is `machine_b` when it differs)
    metric: str
    higher_is_better: bool
    a: float
    b: float
    change: float  # b / a - 1
    test: str  # how significance was judged
    p: float | None
    significant: bool
    verdict: str  # "regression", "improvement", "no change", "within noise"
    a_id: str
    b_id: str
    settings_a: str
    settings_b: str
    differences: tuple[str, ...]  # settings first, then environment ("framework 2.1 -> 2.2")
    machine_b: str | None = None
    machine_id: str = ""  # A's machine's id (`machine_b_id`: B's, when it is another machine)
    machine_b_id: str | None = None
    n_a: int = 0  # ok repeats on each side
    n_b: int = 0
    detection: Detection | None = None  # "within noise": what these repeats can tell
    parameters: str = ""  # what the benchmark id's hash stands for (`identity.describe`)

    @property
    def label(self) -> str:
        """The pair in one line: its benchmark, settings and machine(s)."""
        machine = self.machine + (f" -> {self.machine_b}" if self.machine_b else "")
        return f"{self.name} [{self.settings_a}] on {machine}"

    @property
    def name(self) -> str:
        """The benchmark id, with the parameters its hash stands for."""
        return self.benchmark + (f" ({self.parameters})" if self.parameters else "")


@dataclass(frozen=True)
class Comparison:
    """Everything `dlperf compare` found."""

    rows: list[Row]
    only_a: list[str]  # "benchmark on machine [settings]" of results with no partner in B
    only_b: list[str]
    notes: list[str]  # pairs that could not be judged (no ok repeat on one side)
    machines_a: list[str]
    machines_b: list[str]
    across_machines: bool = False
    reason: str | None = None  # why nothing was comparable (exit code 3); None when some was
    threshold: float = 0.05
    references_left_out: int = 0  # published references not compared (`include_references`)

    @property
    def machines(self) -> list[str]:
        """Every machine either side ran on, once."""
        return sorted(set(self.machines_a) | set(self.machines_b))

    @property
    def exit_code(self) -> int:
        if self.reason is not None:
            return NOTHING_COMPARABLE
        return REGRESSION if any(r.verdict == "regression" for r in self.rows) else 0


def load_side(path: Path) -> list[Result]:
    """A results folder (the newest result of each benchmark x machine x settings) or one
    result file."""
    if path.is_file():
        return [load_result(path)]
    if not path.is_dir():
        raise DlperfError(f"{path}: no such results folder or result file")
    results = ResultStore(path).newest()
    if not results:
        raise DlperfError(f"{path}: no results in this folder")
    return results


def check_threshold(threshold: float) -> None:
    if not (math.isfinite(threshold) and 0 <= threshold < 1):
        raise DlperfError(
            f"--threshold {threshold} must be a fraction in [0, 1), such as 0.05 for 5 %"
        )


Names = dict[tuple[str, str], str]  # (machine id, label) -> how this comparison names it


def _named(machine: Machine, names: Names) -> str:
    return names.get((machine.id, machine.label), machine.label)


def _name(result: Result, names: Names) -> str:
    return f"{describe(result.spec)} on {_named(machine_of(result), names)}"


def pair(
    side_a: Sequence[Result], side_b: Sequence[Result], across_machines: bool = False
) -> tuple[list[tuple[Result, Result]], list[Result], list[Result]]:
    """A's and B's results paired by benchmark and machine (by benchmark alone when
    `across_machines`): equal settings first, then, among the rest of a benchmark, the
    partners whose settings differ least; a same-machine partner always before another.
    Machines are one by their facts (`same_machine`): two whose ids collide are two, and
    results without recorded hardware pair only when `across_machines`."""
    pairs: list[tuple[Result, Result]] = []
    left_a, left_b = list(side_a), list(side_b)
    candidates = []
    for i, a in enumerate(left_a):
        ia, ma = identity_of(a), machine_of(a)
        for j, b in enumerate(left_b):
            ib = identity_of(b)
            other = not same_machine(ma, machine_of(b))
            if ia.benchmark != ib.benchmark or (other and not across_machines):
                continue
            differing = len(set(ia.settings) ^ set(ib.settings))
            candidates.append(((other, differing, i, j), i, j))
    used_a, used_b = set(), set()
    for _, i, j in sorted(candidates):
        if i not in used_a and j not in used_b:
            used_a.add(i), used_b.add(j)
            pairs.append((left_a[i], left_b[j]))
    only_a = [a for i, a in enumerate(left_a) if i not in used_a]
    only_b = [b for j, b in enumerate(left_b) if j not in used_b]
    return pairs, only_a, only_b


def _gpus(machine: Machine) -> str | None:
    if not machine.gpu:
        return None
    text = f"{machine.gpu_count} x {machine.gpu}" if machine.gpu_count else machine.gpu
    return text + (f" {machine.gpu_memory_gib} GiB" if machine.gpu_memory_gib else "")


def machine_changes(a: Machine, b: Machine) -> list[str]:
    """What differs between two machines' recorded hardware, fact by fact ("CPU AMD EPYC 7B13
    -> Intel Xeon Platinum 8480+", "CPUs 2 -> 224", "GPUs – -> 8 x NVIDIA H200 140 GiB"); both
    unrecorded: said so, for they may differ in anything."""
    if not a.known and not b.known:
        return ["hardware not recorded on either side"]
    facts = (
        ("CPU", a.cpu, b.cpu),
        ("CPUs", a.cpu_count, b.cpu_count),
        ("GPUs", _gpus(a), _gpus(b)),
        ("interconnect", a.interconnect, b.interconnect),
    )
    return [f"{name} {x or '–'} -> {y or '–'}" for name, x, y in facts if x != y]


def pair_differences(a: Result, b: Result) -> list[str]:
    """Everything that differs between two paired results: settings, then the machines'
    hardware (when they ran on two), the workload's CPU threads as it reported them, then
    versions, commits and host (`identity.differences`)."""
    found = differences(result_row(a), result_row(b))
    settings = [d for d in found if d.startswith("setting ")]
    ma, mb = machine_of(a), machine_of(b)
    hardware = [] if same_machine(ma, mb) else machine_changes(ma, mb)
    ta, tb = a.environment.threads, b.environment.threads
    threads = [] if ta == tb or any(d.startswith("setting threads ") for d in settings) else [
        f"threads {ta or '–'} -> {tb or '–'}"]  # fmt: skip
    return settings + hardware + threads + found[len(settings) :]


def compare_pair(a: Result, b: Result, threshold: float, names: Names | None = None) -> Row | None:
    """B's result against A's; None when one side has no ok repeat. `names`: how the
    comparison names machines (`identity.machine_names`; their labels when not given)."""
    metric, va, better_up = metric_values(a)
    _, vb, _ = metric_values(b)
    if not va or not vb:
        return None
    v = judge(va, vb, better_up, threshold)
    ma, mb = machine_of(a), machine_of(b)
    names = names or {}
    other = not same_machine(ma, mb)
    return Row(
        benchmark=identity_of(a).benchmark,
        machine=_named(ma, names),
        metric=metric,
        higher_is_better=better_up,
        a=statistics.median(va),
        b=statistics.median(vb),
        change=v.change,
        test=v.test,
        p=v.p,
        significant=v.significant,
        verdict=v.verdict,
        a_id=a.id,
        b_id=b.id,
        settings_a=settings_label(dict(identity_of(a).settings)),
        settings_b=settings_label(dict(identity_of(b).settings)),
        differences=tuple(pair_differences(a, b)),
        machine_b=_named(mb, names) if other else None,
        machine_id=ma.id,
        machine_b_id=mb.id if other else None,
        n_a=len(va),
        n_b=len(vb),
        detection=repeats_to_detect(va, vb, threshold) if v.verdict == "within noise" else None,
        parameters=settings_label(parameters_of(a.spec)) if parameters_of(a.spec) else "",
    )


def noise_note(row: Row, threshold: float) -> str | None:
    """Why a change beyond the threshold is "within noise", in one line a user can act on:
    the repeats and their spread, whether these counts can show any change at all, and how many
    repeats a side would show a change of the threshold's size on this noise."""
    d = row.detection
    if d is None:
        return None
    counts = f"{d.n_a} vs {d.n_b} repeats"
    cv_a, cv_b = f"{d.cv_a:.0%}", f"{d.cv_b:.0%}"
    one = cv_a == cv_b or 1 in (d.n_a, d.n_b)  # a side of one repeat has the other's
    noise = f"CV {cv_a}" if one else f"CV {cv_a} and {cv_b}"
    size = f"a {threshold:.0%} change"
    if d.repeats is None:
        needs = f"more than {REPEATS_SEARCHED} repeats a side: quieten the machine"
    else:
        needs = f"{d.repeats} repeats a side"
    if not d.reachable:
        return (f"{counts} at {noise}: the {row.test} test cannot reach significance at "
                f"n={d.n_a}/{d.n_b} at all; {size} needs {needs}")  # fmt: skip
    if not d.enough:
        return f"{counts} at {noise} are too few to show {size}; it needs {needs}"
    return (f"{counts} at {noise} would show {size} in a typical run, but these overlap: "
            "rerun on a quiet machine (see dlperf doctor)")  # fmt: skip


def compare_results(
    side_a: Sequence[Result],
    side_b: Sequence[Result],
    threshold: float = 0.05,
    across_machines: bool = False,
    include_references: bool = False,
) -> Comparison:
    """Pair the two sides' results and judge every pair (see the module docstring); published
    references only when `include_references`."""
    check_threshold(threshold)
    left_out = 0
    if not include_references:
        kept_a = [r for r in side_a if not is_published_reference(r)]
        kept_b = [r for r in side_b if not is_published_reference(r)]
        left_out = len(side_a) + len(side_b) - len(kept_a) - len(kept_b)
        side_a, side_b = kept_a, kept_b
    pairs, only_a, only_b = pair(side_a, side_b, across_machines)
    names = machine_names((m.id, m.label) for m in map(machine_of, [*side_a, *side_b]))
    rows, notes = [], []
    for a, b in pairs:
        row = compare_pair(a, b, threshold, names)
        if row is None:
            notes.append(f"{_name(a, names)}: no ok repeat on one side, not compared")
        else:
            rows.append(row)
    if rows and not across_machines:
        # Unpaired only for want of one machine: say so, or "only in A" reads as "not run".
        benchmarks_b = {identity_of(r).benchmark for r in only_b}
        apart = [r for r in only_a if identity_of(r).benchmark in benchmarks_b]
        if apart:
            notes.append(
                f"{len(apart)} result(s) only in A have a result of the same benchmark only in "
                "B on another machine (or with no hardware recorded): --across-machines pairs "
                "them"
            )
    machines_a = sorted({_named(machine_of(r), names) for r in side_a})
    machines_b = sorted({_named(machine_of(r), names) for r in side_b})
    reason = None
    if not rows:
        common = {identity_of(r).benchmark for r in side_a} & {
            identity_of(r).benchmark for r in side_b
        }
        if pairs:
            reason = "no pair had ok repeats on both sides"
        elif common and not across_machines:
            unrecorded = any(not machine_of(r).known for r in [*side_a, *side_b]
                             if identity_of(r).benchmark in common)  # fmt: skip
            reason = (
                "the benchmarks in common ran on different machines"
                + (" or on machines whose hardware was not recorded" if unrecorded else "")
                + f" (A: {'; '.join(machines_a)}; B: {'; '.join(machines_b)}): add "
                "--across-machines to compare them anyway"
            )
        elif left_out and (not side_a or not side_b):
            reason = (f"{'A' if not side_a else 'B'} holds only published references: "
                      "add --include-references to compare them")  # fmt: skip
        else:
            reason = "A and B have no benchmark in common"
    rows.sort(key=lambda r: (r.benchmark, r.machine, r.settings_a, r.settings_b))
    return Comparison(
        rows=rows,
        only_a=sorted(_name(r, names) for r in only_a),
        only_b=sorted(_name(r, names) for r in only_b),
        notes=sorted(notes),
        machines_a=machines_a,
        machines_b=machines_b,
        across_machines=across_machines,
        reason=reason,
        threshold=threshold,
        references_left_out=left_out,
    )


def compare(
    a: Path,
    b: Path,
    threshold: float = 0.05,
    across_machines: bool = False,
    include_references: bool = False,
) -> Comparison:
    """Compare two results folders (or result files)."""
    check_threshold(threshold)
    return compare_results(load_side(a), load_side(b), threshold, across_machines,
                           include_references)  # fmt: skip


def machines_line(c: Comparison) -> str:
    """Which machines the results ran on, each named in full (`identity.machine_names`)."""
    if c.across_machines:
        return (f"Across machines (asked for with --across-machines): A ran on "
                f"{'; '.join(c.machines_a)}; B ran on {'; '.join(c.machines_b)}. "
                "Each row names what differs.")  # fmt: skip
    machines = c.machines
    return f"Machine{'s' if len(machines) > 1 else ''}: {'; '.join(machines)}."


def test_line(c: Comparison) -> str:
    """What makes a change count."""
    return (f"A change counts beyond {c.threshold:.0%} when significant: exact Mann-Whitney U "
            f"test at alpha {ALPHA}; with too few repeats for it, 95% Student t intervals of "
            "the means apart.")  # fmt: skip


def references_line(c: Comparison) -> str | None:
    """How many published references were left out, and how to include them."""
    if not c.references_left_out:
        return None
    return (f"{c.references_left_out} published reference(s) (imported MLPerf results) left "
            "out: --include-references compares them.")  # fmt: skip


def render_markdown(c: Comparison) -> str:
    """The comparison as Markdown (for a CI comment): the machines, the test, a row per pair,
    why each change "within noise" is, what is only on one side, and why nothing was
    comparable when that is so. Text from the results is escaped as the reports escape it
    (`dlperf.report.cells`)."""
    from dlperf.report.cells import cell, text

    lines = [text(machines_line(c)), "", text(test_line(c)), ""]
    left_out = references_line(c)
    lines += [text(left_out), ""] if left_out else []
    if c.rows:
        lines += [
            "| benchmark | settings | machine | metric | A | B | change | test | p | verdict "
            "| differences |",
            "|---|---|---|---|---:|---:|---:|---|---:|---|---|",
        ]
    for r in c.rows:
        p = f"{r.p:.3g}" if r.p is not None else "–"
        mark = "**" if r.verdict == "regression" else ""
        machine = r.machine + (f" -> {r.machine_b}" if r.machine_b else "")
        lines.append(
            f"| {cell(r.name)} | {cell(r.settings_a)} | {cell(machine)} | {cell(r.metric)} "
            f"| {figure(r.a)} | {figure(r.b)} | {r.change:+.1%} | {r.test} | {p} | "
            f"{mark}{r.verdict}{mark} | {cell('; '.join(r.differences) or 'none')} |"
        )
    notes = [(r, noise_note(r, c.threshold)) for r in c.rows]
    if any(note for _, note in notes):
        lines += ["", "Within noise:", ""]
        lines += [f"- {text(r.label)}: {text(note)}" for r, note in notes if note]
    if c.only_a or c.only_b or c.notes:
        lines.append("")
    lines += [f"- only in A: {text(n)}" for n in c.only_a]
    lines += [f"- only in B: {text(n)}" for n in c.only_b]
    lines += [f"- {text(n)}" for n in c.notes]
    if c.reason:
        lines += ["", f"**Nothing compared:** {text(c.reason)}."]
    return "\n".join(lines) + "\n"
