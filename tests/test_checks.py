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
def test_every_framework_builds_the_same_models():
    # The models all six frameworks have (PyTorch's SuperBench families are checked in
    # test_frameworks.py).
    checks = check_models(models=["resnet50", "bert"])
    frameworks = {c.framework for c in checks}
    assert frameworks == {"pytorch", "tensorflow", "paddle", "mxnet", "oneflow", "jax"}
    bad = [
        (c.framework, c.model, c.params, c.flops_per_sample, c.error) for c in checks if not c.ok
    ]
    assert not bad
    for c in checks:
        expected = 24.535e9 if c.model == "resnet50" else 85.50e9
        assert c.flops_per_sample == pytest.approx(expected, rel=1e-3)
    # The sixth (Flax) at the catalog's counts, and the FLOPs PyTorch's workload counts.
    jax = {c.model: c for c in checks if c.framework == "jax"}
    torch = {c.model: c for c in checks if c.framework == "pytorch"}
    assert (jax["resnet50"].params, jax["bert"].params) == (25_557_032, 110_106_428)
    for model in ("resnet50", "bert"):
        assert jax[model].shape == torch[model].shape
        assert jax[model].flops_per_sample == pytest.approx(torch[model].flops_per_sample)
