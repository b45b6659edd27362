"""The catalog of benchmarks: model identity and presets, shared by every framework.

A preset sets the window, the repeat count and the shapes; it never changes the architecture,
so parameter counts are the same under every preset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf import DlperfError

PRESETS = ("dlperf", "smoke")


@dataclass(frozen=True)
class PresetValues:
    skip: int
    measure: int
    repeats: int
    batch_fp32: int
    batch_amp: int
    image_size: int | None = None
    seq_len: int | None = None
    timeout_s: float = 1800.0
    no_output_timeout_s: float = 600.0


@dataclass(frozen=True)
class ModelDef:
    name: str
    description: str
    params: int | None  # expected parameter count at the default head size, None if it varies
    presets: dict[str, PresetValues] = field(default_factory=dict)


MODELS: dict[str, ModelDef] = {
    m.name: m
    for m in (
        ModelDef(
            "resnet50",
            "ResNet50-v1.5 image classification training (stride on the 3x3 conv), 1000 classes",
            25_557_032,
            {
                "dlperf": PresetValues(20, 100, 7, 128, 256, image_size=224),
                "smoke": PresetValues(2, 5, 3, 4, 4, image_size=64, timeout_s=300),
            },
        ),
        ModelDef(
            "bert",
            "BERT-base pretraining (MLM + NSP heads, tied decoder, vocab 30522)",
            110_106_428,
            {
                "dlperf": PresetValues(20, 100, 7, 32, 64, seq_len=128),
                "smoke": PresetValues(1, 3, 3, 2, 2, seq_len=32, timeout_s=300),
            },
        ),
        ModelDef(
            "pace",
            "Calibration workload: steps paced to an exact period, so the true throughput is known",
            0,
            {
                "dlperf": PresetValues(20, 100, 7, 10, 10, timeout_s=600, no_output_timeout_s=30),
                "smoke": PresetValues(5, 20, 3, 10, 10, timeout_s=120, no_output_timeout_s=10),
            },
        ),
    )
}


def get_model(name: str) -> ModelDef:
    try:
        return MODELS[name]
    except KeyError:
        raise DlperfError(
            f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}"
        ) from None


def preset_values(model: str, preset: str) -> PresetValues:
    if preset not in PRESETS:
        raise DlperfError(f"unknown preset {preset!r}; choose one of: {', '.join(PRESETS)}")
    return get_model(model).presets[preset]
