"""Reports and the site of a results folder holding two machines and an ablation, made from
real results (tests/data/real_results): one section, table and chart per machine, every number
labelled with its machine, nothing pooled; settings as a column and an Ablation table."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from dlperf.assemble import build_result
from dlperf.identity import Machine, identity_of, machine_of
from dlperf.report import render_model_report, write_reports
from dlperf.report._data import ablations, by_machine, hardware_label, select
from dlperf.report.figures import scaling_figure, throughput_figure
from dlperf.report.site import history, write_site
from dlperf.resultio import load_result
from dlperf.rows import metric_values
from dlperf.schema import Result
from dlperf.store import ResultStore

REAL = Path(__file__).parent / "data" / "real_results"
PYTORCH = "pytorch-resnet50-train-fp32-cpu-1x1-b4-i64-c8a15c"
TENSORFLOW = "tensorflow-resnet50-train-fp32-cpu-1x1-b4-i64-06f9ad"
DEFAULT = "20261127T151322Z-59d9dc"  # pytorch, its default practice at 64 px: channels_last=0
CHANNELS_LAST = "20261127T151353Z-058bb4"  # the same with --set channels_last=1
SPEEDUP = 3.0
OTHER_CPU = "Intel(R) Xeon(R) Platinum 8480+"


def real_results() -> list[Result]:
    return [load_result(path) for path in sorted(REAL.glob("*/*.json"))]


def on_another_machine(result: Result) -> Result:
    """`result` as if measured on another machine (another host, CPU model and CPU count)
    that ran every repeat `SPEEDUP` times as fast: the repeats' windows took a third of the
    time, and the result is assembled from them as a run assembles it."""
    repeats = []
    for r in result.repeats:
        if r.throughput is not None and r.window is not None:
            window = r.window.model_copy(update={"elapsed_s": r.window.elapsed_s / SPEEDUP})
            r = r.model_copy(update={"throughput": r.throughput * SPEEDUP, "window": window})
        repeats.append(r)
    environment = result.environment.model_copy(
        update={"host": "bench-b", "cpu": OTHER_CPU, "cpu_count": 224, "device_name": OTHER_CPU}
    )
    other = build_result(result.spec, result.id[:-6] + "b" + result.id[-5:], repeats,
                         environment=environment)  # fmt: skip
    return other.model_copy(update={"created": result.created})  # measured at the same time


def median(result: Result) -> float:
    return statistics.median(metric_values(result)[1])


@pytest.fixture
def two_machines(tmp_path: Path) -> tuple[Path, list[Result], list[Result]]:
    """A results folder: the real results (machine A) and their copies on machine B."""
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder, ignore=shutil.ignore_patterns("*.md"))
    real = real_results()
    copies = [on_another_machine(r) for r in real]
    for r in copies:
        ResultStore(folder).write(r)
    return folder, real, copies


def sections(page: str) -> dict[str, str]:
    """The page's level-2 sections by heading."""
    parts = re.split(r"^## (.*)$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def table_rows(section: str, header_start: str) -> list[list[str]]:
    """The rows of the table in `section` whose header starts with `header_start`."""
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_copy_is_another_machine_three_times_as_fast() -> None:
    real = real_results()
    for r in real:
        other = on_another_machine(r)
        assert machine_of(other) != machine_of(r)
        assert identity_of(other).benchmark == identity_of(r).benchmark
        assert identity_of(other).settings == identity_of(r).settings
        assert median(other) == pytest.approx(SPEEDUP * median(r))
    a, b = machine_of(real[0]), machine_of(on_another_machine(real[0]))
    assert a.label == "AMD EPYC, 2 CPUs"
    assert b.label == f"{OTHER_CPU}, 224 CPUs"


def test_a_report_of_two_machines_has_a_section_table_and_chart_each(
    two_machines: tuple[Path, list[Result], list[Result]], tmp_path: Path
) -> None:
    folder, real, copies = two_machines
    reports = tmp_path / "reports"
    write_reports(folder, reports)
    page = (reports / "resnet50.md").read_text()
    machines: dict[str, tuple[Machine, list[Result]]] = {
        "A": (machine_of(real[0]), real),
        "B": (machine_of(copies[0]), copies),
    }
    found = sections(page)
    for name, (machine, mine) in machines.items():
        heading = f"{machine.label} (machine {machine.id})"
        assert heading in found, f"machine {name} has no section"
        section = found[heading]
        # one cross-framework table: its row holds this machine's default medians only
        assert section.count("### Cross-framework") == 1
        (row,) = table_rows(section, "| mode |")
        by_id = {r.id: r for r in mine}
        pytorch = next(r for r in mine if r.id.endswith(DEFAULT[-5:]))
        tensorflow = next(r for r in mine if r.spec.framework == "tensorflow")
        assert row[-2].split(" ")[0] == f"{median(pytorch):.2f}"
        assert row[-1].split(" ")[0] == f"{median(tensorflow):.2f}"
        # its own chart, named by the machine's id, in its own section only
        chart = f"resnet50-{machine.id}.png"
        assert f"![resnet50 throughput on {machine.label}]({chart})" in section
        assert (reports / chart).read_bytes().startswith(b"\x89PNG")
        # the per-framework tables and the ablation: this machine's numbers
        others = [r for n, (_, rs) in machines.items() if n != name for r in rs]
        for r in by_id.values():
            assert f"| {median(r):.2f}" in section
        for r in others:
            assert f"{median(r):.2f}" not in section, "another machine's number"
        assert "### Ablation" in section and "| channels_last 0 -> 1 |" in section
    assert not (reports / "resnet50.png").exists()  # a one-machine name would be ambiguous
    # the Hardware section lists the machines with their ids and hosts
    hardware = table_rows(found["Hardware"], "| machine |")
    assert [r[:3] for r in hardware] == [
        ["AMD EPYC, 2 CPUs", f"`{machine_of(real[0]).id}`", "vm"],
        [f"{OTHER_CPU}, 224 CPUs", f"`{machine_of(copies[0]).id}`", "bench-b"],
    ]
    # every row of the whole-page tables names its machine, one machine's rows after the other's
    a, b = f"`{machine_of(real[0]).id}`", f"`{machine_of(copies[0]).id}`"
    results = table_rows(found["All results"], "| configuration |")
    assert [row[1] for row in results] == [a, a, a, b, b, b]
    for row in results:
        r = next(r for r in real + copies if r.id == row[2])
        assert row[1] == f"`{machine_of(r).id}`"
    telemetry = table_rows(found["Telemetry"], "| configuration |")
    assert [row[1] for row in telemetry] == [a, a, a, b, b, b]
    assert "The numbers are from 2 machines, each in its own section" in page
    # the same results give the same page
    write_reports(folder, reports)
    assert (reports / "resnet50.md").read_text() == page


def test_charts_are_drawn_and_named_per_machine(
    two_machines: tuple[Path, list[Result], list[Result]], tmp_path: Path
) -> None:
    folder, real, copies = two_machines
    chosen = select(ResultStore(folder).results(), "resnet50")
    groups = by_machine(chosen)
    assert [m.id for m, _ in groups] == [machine_of(real[0]).id, machine_of(copies[0]).id]
    for machine, mine in groups:
        assert hardware_label(mine) == f"{machine.label} (machine {machine.id})"
        figure = throughput_figure(mine, "resnet50")
        assert machine.label in figure.layout.title.text
        # the throughput panel's bars, not the memory panel's nor the marks' legend keys
        bars = {trace.name: list(trace.y) for trace in figure.data
                if trace.yaxis in (None, "y") and trace.x != (None,)}  # fmt: skip
        defaults = {r.spec.framework: median(r) for r in mine
                    if r.id[-5:] != CHANNELS_LAST[-5:]}  # fmt: skip
        assert bars == {fw: [pytest.approx(v)] for fw, v in defaults.items()}
        assert scaling_figure(mine, "resnet50") is None  # one topology
    # one machine left: the page's chart is <model>.png again, the per-machine ones go
    reports = tmp_path / "reports"
    write_reports(folder, reports)
    assert sorted(p.name for p in reports.glob("*.png")) == sorted(
        f"resnet50-{m.id}.png" for m, _ in groups
    )
    for r in copies:
        (folder / identity_of(r).benchmark / f"{r.id}.json").unlink()
    write_reports(folder, reports)
    assert sorted(p.name for p in reports.glob("*.png")) == ["resnet50.png"]
    page = (reports / "resnet50.md").read_text()
    machine = machine_of(real[0])
    assert (
        f"Every number on this page is from one machine: **{machine.label}** (machine "
        f"`{machine.id}`; host vm)." in page
    )
    assert f"(machine {machine.id})" not in page  # no per-machine headings


def test_the_site_of_two_machines_keeps_them_apart(
    two_machines: tuple[Path, list[Result], list[Result]], tmp_path: Path
) -> None:
    folder, real, copies = two_machines
    site = write_site(folder, tmp_path / "site")
    page = (tmp_path / "site" / "resnet50.html").read_text()
    charts = site.pages["resnet50.html"]
    # per machine: throughput (with the peak memory the telemetry recorded under it) and a
    # history chart (pytorch's series has two points), no latency chart for training runs;
    # each chart's title names its machine
    assert [c.split("-")[1] for c in charts] == ["throughput", "history"] * 2
    assert page.count("peak GiB used\\u003cbr\\u003e(host RAM, whole machine)") == 2
    titles = [json.loads(f'"{t}"') for t in re.findall(r'"title":\{"text":"([^"]*)"', page)]
    titles = [re.sub(r"<br><span[^>]*>(.*)</span>$", r" \1", t) for t in titles]  # 2nd line
    charted = [t for t in titles if " on " in t]  # not the axes'
    assert charted == [
        f"{what} on {machine.label} (machine {machine.id})"
        for machine in (machine_of(real[0]), machine_of(copies[0]))
        for what in ("resnet50 throughput",
                     "train · fp32 · cpu · b4 · 1x1 · image 64 · ootb")
    ]  # fmt: skip
    # history: a line per benchmark on a machine, never across machines
    points = history(folder)
    assert sorted(points) == sorted(
        (benchmark, machine_of(r).id)
        for benchmark in (PYTORCH, TENSORFLOW)
        for r in (real[0], copies[0])
    )
    line = points[(PYTORCH, machine_of(real[0]).id)]
    assert [p.result_id for p in line] == [DEFAULT, CHANNELS_LAST]
    assert line[1].changes[0] == "setting channels_last 0 -> 1"
    assert all(p.machine_id == machine_of(real[0]).id for p in line)
    # the index's configurations: benchmark x machine x settings, in their machine's section
    index = (tmp_path / "site" / "index.html").read_text()
    assert index.count("<td><code>" + PYTORCH + "</code></td>") == 4
    sections = re.split(r"<h2>", index)
    for machine in (machine_of(real[0]), machine_of(copies[0])):
        (section,) = [s for s in sections if s.startswith(f"{machine.label} (machine ")]
        assert section.count(f'<tr data-machine="{machine.id}"') == 3
        assert section.count("<tr data-machine=") == 3  # the other machine's: in its own
        assert page.count(f"<td>{machine.label} (<code>{machine.id}</code>)</td>") == 3


def test_an_ablation_is_one_row_a_settings_column_and_an_ablation_table(
    tmp_path: Path,
) -> None:
    """PyTorch's default (channels_last=0 at 64 px) and `--set channels_last=1` on one
    machine: one cross-framework row showing the default, both in pytorch's table with their
    settings, and the Ablation table naming what differs with both medians."""
    real = real_results()
    page = render_model_report(real, "resnet50")
    default = next(r for r in real if r.id == DEFAULT)
    variant = next(r for r in real if r.id == CHANNELS_LAST)
    found = sections(page)
    (row,) = table_rows(found["Cross-framework"], "| mode |")
    assert row[-2] == f"{median(default):.2f} (noisy)"
    assert f"{median(variant):.2f}" not in found["Cross-framework"]
    pytorch = table_rows(found["pytorch"], "| nodes |")
    assert [r[3] for r in pytorch] == [
        "channels_last=0, fused_optimizer=1 (default)",
        "channels_last=1, fused_optimizer=1",
    ]
    assert [r[4].split(" ")[0] for r in pytorch] == [
        f"{median(default):.2f}", f"{median(variant):.2f}"
    ]  # fmt: skip
    (ablation,) = table_rows(found["Ablation"], "| benchmark |")
    (judged,) = ablations(real)
    assert ablation == [
        f"`{PYTORCH}`",
        "channels_last=0, fused_optimizer=1",
        "channels_last=1, fused_optimizer=1",
        "channels_last 0 -> 1",
        f"{median(default):.2f}",
        f"{median(variant):.2f}",
        f"{100 * (median(variant) / median(default) - 1):+.1f}%",
        judged.verdict.verdict,
        judged.verdict.test,
    ]
    assert judged.baseline.id == DEFAULT and judged.variant.id == CHANNELS_LAST
    # the stored JSON is what the page says it is
    stored = json.loads((REAL / PYTORCH / f"{CHANNELS_LAST}.json").read_text())
    assert stored["spec"]["practice"]["channels_last"] == "1"
