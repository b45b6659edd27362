from dlperf.models import MODELS
from dlperf.spec import resolve_spec


def test_dlperf_preset_is_dlperfs_protocol():
    rn = resolve_spec("pytorch", "resnet50")
    assert (rn.skip, rn.measure, rn.repeats) == (20, 100, 7)
    assert (rn.batch_size, rn.image_size, rn.precision) == (128, 224, "fp32")
    assert resolve_spec("pytorch", "resnet50", overrides={"precision": "amp"}).batch_size == 256
    bert = resolve_spec("pytorch", "bert")
    assert (bert.batch_size, bert.seq_len) == (32, 128)
    assert resolve_spec("pytorch", "bert", overrides={"precision": "amp"}).batch_size == 64


def test_explicit_flags_override_the_preset():
    s = resolve_spec(
        "pytorch", "bert", preset="smoke", overrides={"batch_size": 32, "repeats": 7, "skip": 20}
    )
    assert (s.batch_size, s.repeats, s.skip, s.seq_len) == (32, 7, 20, 32)
    assert s.preset == "smoke"


def test_smoke_shrinks_shapes_and_steps_never_the_architecture():
    # The architecture is the model's: presets only carry shapes, window and repeats.
    for model in MODELS.values():
        smoke, full = model.presets["smoke"], model.presets["dlperf"]
        assert smoke.measure + smoke.skip < full.measure + full.skip
        assert set(vars(smoke)) == set(vars(full))
    s = resolve_spec("pytorch", "resnet50", preset="smoke")
    assert s.image_size < 224 and s.repeats == 3


def test_smoke_shrinks_an_official_window_to_whole_report_intervals() -> None:
    """A smoke run of an upstream's script is a path test: the preset's skip and measure,
    rounded up to the upstream's report interval, never past the window DLPerf measured."""
    from dlperf.models import PresetValues
    from dlperf.official.manifest import MeasureWindow
    from dlperf.spec import official_window

    smoke = PresetValues(2, 5, 3, 4, 4, image_size=64)
    every_20 = MeasureWindow(log_every=20, skip=20, measure=100)
    assert official_window(every_20, smoke, "smoke") == {"skip": 20, "measure": 20}
    assert official_window(every_20, smoke, "dlperf") == {"skip": 20, "measure": 100}
    every_step = MeasureWindow(log_every=1, skip=20, measure=100)
    assert official_window(every_step, smoke, "smoke") == {"skip": 2, "measure": 5}
    coarse = MeasureWindow(log_every=100, skip=100, measure=500)
    assert official_window(coarse, smoke, "smoke") == {"skip": 100, "measure": 100}
    spec = resolve_spec("jax", "resnet50", preset="smoke", overrides={"impl": "official"})
    assert (spec.skip, spec.measure) == (20, 20)
