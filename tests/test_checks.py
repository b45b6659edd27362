import pytest

from dlperf.checks import ModelCheck, check_models


def make(**over):
    base = dict(
        framework="x", model="resnet50", shape="image 224", params=25_557_032,
        expected_params=25_557_032, flops_per_sample=24.5e9, reference_flops=24.5e9,
    )  # fmt: skip
    return ModelCheck(**{**base, **over})


def test_a_check_passes_only_when_params_and_flops_agree():
    assert make().ok
    assert not make(params=25_557_033).ok
    assert not make(flops_per_sample=24.5e9 * 1.01).ok
    assert make(flops_per_sample=24.5e9 * 1.0005).ok
    assert not make(params=None, flops_per_sample=None, error="--describe failed").ok


@pytest.mark.framework
def test_pytorch_builds_the_catalog_models():
    checks = check_models(["pytorch"])
    assert [(c.model, c.ok) for c in checks] == [("resnet50", True), ("bert", True)]
    assert checks[0].flops_per_sample == pytest.approx(24.54e9, rel=1e-3)
