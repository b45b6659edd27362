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
