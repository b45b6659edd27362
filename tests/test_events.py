import json

from dlperf.events import Mark, merge_ranks, parse_events


def lines(*events):
    return "\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n"


def test_parse_start_ready_steps_end():
    text = lines(
        {"event": "start", "framework": "x", "params": 5},
        {"event": "ready", "time": 1.0},
        {"event": "step", "step": 1, "time": 1.5, "samples": 4, "loss": 2.0},
        {"event": "step", "step": 2, "time": 2.0, "samples": 4, "loss": 1.5},
        {"event": "end", "time": 2.1},
    )
    run = parse_events(text)
    assert run.start == {"framework": "x", "params": 5}
    assert run.marks == [Mark(0, 1.0, 0.0), Mark(1, 1.5, 4.0), Mark(2, 2.0, 4.0)]
    assert run.losses == [2.0, 1.5]
    assert run.ended and run.malformed == 0 and run.notes == []


def test_malformed_lines_are_counted_and_skipped():
    text = lines(
        {"event": "ready", "time": 1.0},
        "not json",
        '{"event": "step", "step": \x00',
        {"event": "step", "step": 1, "time": 1.5, "samples": 4},
        {"event": "step", "step": 2, "time": "NaN", "samples": 4},
        {"event": "step", "step": 1, "time": 1.7, "samples": 4},  # went backwards
        {"event": "mystery"},
        {"event": "step", "step": 2, "time": 2.0, "samples": 4},
    )
    run = parse_events(text)
    assert [m.step for m in run.marks] == [0, 1, 2]
    assert run.malformed == 5
    assert run.notes == ["5 malformed event line(s) ignored"]
    assert not run.ended


def test_unsupported_configuration_is_reported():
    run = parse_events(lines({"event": "unsupported", "reason": "no fp16 kernels on cpu"}))
    assert run.unsupported == "no fp16 kernels on cpu" and run.marks == []


def test_empty_text():
    run = parse_events("")
    assert run.marks == [] and run.start == {} and run.malformed == 0


def test_the_end_event_carries_the_workloads_peak_memory():
    end = {"event": "end", "time": 2.1, "peak_rss_mib": 812.5}
    assert parse_events(lines(end)).peak_rss_mib == 812.5
    assert parse_events(lines({"event": "end", "time": 2.1})).peak_rss_mib is None  # older
    for bad in ("a lot", -3, 0, "NaN", [1]):  # the end still counts, the size does not
        run = parse_events(lines({**end, "peak_rss_mib": bad}))
        assert run.ended and run.peak_rss_mib is None and run.malformed == 0
        assert "peak_rss_mib" in run.notes[0] and "not a size" in run.notes[0]


def test_a_jobs_peak_memory_is_its_largest_ranks():
    ranks = [parse_events(lines({"event": "end", "time": 1.0, "peak_rss_mib": m})) for m in
             (700.0, 910.0)]  # fmt: skip
    assert merge_ranks(ranks).peak_rss_mib == 910.0
    assert merge_ranks([parse_events(lines({"event": "end", "time": 1.0}))]).peak_rss_mib is None
