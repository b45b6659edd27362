"""The catalog of benchmarks: model identity and presets, shared by every framework.

A preset sets the window, the repeat count and the shapes; it never changes the architecture,
so parameter counts are the same under every preset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlperf import DlperfError
from dlperf.wording import did_you_mean

PRESETS = ("dlperf", "smoke")
CV, NLP = "computer vision", "natural language processing"
# The smoke preset's LoadGen settings where not given (a path test): a 1 s minimum duration
# (LoadGen's own is 10 s); Offline's one query as large as that second needs (LoadGen's
# default asks 100 samples at least: half a minute on 2 busy CPU cores); MultiStream queries
# of 2 samples, as its p99 needs 662 queries (LoadGen's 8 samples each would take minutes).
SMOKE_LOADGEN = {"min_duration_s": 1.0}
SMOKE_LOADGEN_SCENARIO = {
    "offline": {"min_query_count": 1.0},
    "multistream": {"samples_per_query": 2.0},
}


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
    kind: str = "model"  # "micro": a FAMBench-style microbenchmark of one op (impl "micro")
    # Where TorchBench's score V0 puts it: domain -> task (its `torchbenchmark/tasks.py` names).
    domain: str = ""
    task: str = ""


def _gpt2(
    name: str, size: str, layers: int, hidden: int, heads: int, params: int, smoke: PresetValues
) -> ModelDef:
    return ModelDef(
        name,
        f"GPT-2 {size} causal-LM training ({layers} layers, hidden {hidden}, {heads} heads, "
        "vocab 50257, tied LM head), AdamW",
        params,
        {"dlperf": PresetValues(20, 100, 7, 8, 8, seq_len=224), "smoke": smoke},
        domain=NLP,
        task="language modeling",
    )


def _resnet(depth: int, params: int, smoke: PresetValues) -> ModelDef:
    return ModelDef(
        f"resnet{depth}",
        f"ResNet{depth} image classification training (torchvision layout, stride on the 3x3 "
        "conv), 1000 classes",
        params,
        {"dlperf": PresetValues(20, 100, 7, 192, 192, image_size=224), "smoke": smoke},
        domain=CV,
        task="classification",
    )


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
            domain=CV,
            task="classification",
        ),
        ModelDef(
            "bert",
            "BERT-base pretraining (MLM + NSP heads, tied decoder, vocab 30522)",
            110_106_428,
            {
                "dlperf": PresetValues(20, 100, 7, 32, 64, seq_len=128),
                "smoke": PresetValues(1, 3, 3, 2, 2, seq_len=32, timeout_s=300),
            },
            domain=NLP,
            task="language modeling",
        ),
        # SuperBench's PyTorch model families (microsoft/superbenchmark, model_benchmarks/
        # pytorch_*.py) and FAMBench's DLRM; code in adapters/pytorch/zoo.py. The "dlperf"
        # preset takes the batch and shapes of SuperBench's Azure NDv4 (A100) config
        # (superbench/config/azure_ndv4.yaml: gpt_models, bert_models, resnet_models), the same
        # batch for fp32 and AMP as SuperBench runs both; "smoke" is a path test on 2 CPU cores,
        # where the large models' step is bounded by their weights and optimizer, not shapes.
        _gpt2("gpt2-small", "small", 12, 768, 12, 124_439_808,
              PresetValues(1, 3, 3, 2, 2, seq_len=32, timeout_s=300)),
        _gpt2("gpt2-medium", "medium", 24, 1024, 16, 354_823_168,
              PresetValues(1, 3, 3, 1, 1, seq_len=16, timeout_s=600)),
        _gpt2("gpt2-large", "large", 36, 1280, 20, 774_030_080,
              PresetValues(1, 2, 3, 1, 1, seq_len=16, timeout_s=900)),
        # Weights, gradients and AdamW state: 16 bytes per parameter, ~25 GB even for smoke.
        _gpt2("gpt2-xl", "XL", 48, 1600, 25, 1_557_611_200,
              PresetValues(1, 2, 3, 1, 1, seq_len=16, timeout_s=1200)),
        ModelDef(
            "bert-large",
            "BERT-large pretraining (24 layers, hidden 1024, 16 heads; MLM + NSP, tied decoder)",
            336_226_108,
            {
                "dlperf": PresetValues(20, 100, 7, 32, 32, seq_len=224),
                "smoke": PresetValues(1, 3, 3, 1, 1, seq_len=16, timeout_s=600),
            },
            domain=NLP,
            task="language modeling",
        ),
        ModelDef(
            # The NDv4 config runs a smaller LSTM (input 224, hidden 1000, batch 224, seq 32);
            # this is the registered pytorch-lstm with the benchmark's own defaults.
            "lstm",
            "SuperBench's LSTM: input 256, hidden 1024, 8 layers, 100-class head on the last "
            "step, SGD; --seq-len is the number of time steps",
            64_131_172,
            {
                "dlperf": PresetValues(20, 100, 7, 32, 32, seq_len=512),
                "smoke": PresetValues(1, 3, 3, 2, 2, seq_len=8, timeout_s=300),
            },
            domain=NLP,
            task="other nlp",
        ),
        _resnet(18, 11_689_512, PresetValues(2, 5, 3, 4, 4, image_size=64, timeout_s=300)),
        _resnet(34, 21_797_672, PresetValues(2, 5, 3, 4, 4, image_size=64, timeout_s=300)),
        _resnet(101, 44_549_160, PresetValues(1, 3, 3, 2, 2, image_size=64, timeout_s=300)),
        _resnet(152, 60_192_808, PresetValues(1, 3, 3, 2, 2, image_size=64, timeout_s=300)),
        ModelDef(
            # FAMBench's default OOTB DLRM training config (run_dlrm_ootb_train.sh), with a
            # fixed pooling factor: batch 64, 100 indices per lookup.
            "dlrm",
            "DLRM training (FAMBench OOTB config: 8 tables x 1M rows x 64, bottom MLP "
            "512-512-64, dot interaction, top MLP 1024-1024-1024-1, BCE, SGD); "
            "--seq-len is the number of indices per lookup",
            514_499_137,
            {
                "dlperf": PresetValues(20, 100, 7, 64, 64, seq_len=100),
                "smoke": PresetValues(2, 5, 3, 16, 16, seq_len=10, timeout_s=300),
            },
            domain="recommendation",
            task="recommendation",
        ),
        # FAMBench's microbenchmarks (benchmarks/dlrm/ubench): one op, scored in TF/s or GB/s;
        # code in adapters/<framework>/micro.py, shapes from --set (see `dlperf list`).
        ModelDef(
            "linear",
            "Micro: a stack of nn.Linear GEMMs (FAMBench linear_A: 1024 x 1024), TF/s",
            None,
            {
                "dlperf": PresetValues(20, 100, 7, 256, 256, timeout_s=900),
                "smoke": PresetValues(3, 10, 3, 64, 64, timeout_s=300),
            },
            kind="micro",
            domain="other",
            task="microbenchmarks",
        ),
        ModelDef(
            "embeddingbag",
            "Micro: EmbeddingBag sum pooling over a 4.8M x 56 table (FAMBench emb 'B'), GB/s",
            None,
            {
                "dlperf": PresetValues(20, 100, 7, 2048, 2048, timeout_s=900),
                "smoke": PresetValues(3, 10, 3, 256, 256, timeout_s=300),
            },
            kind="micro",
            domain="other",
            task="microbenchmarks",
        ),
        ModelDef(
            "pace",
            "Calibration workload: steps paced to an exact period, so the true throughput is known",
            0,
            {
                "dlperf": PresetValues(20, 100, 7, 10, 10, timeout_s=600, no_output_timeout_s=30),
                "smoke": PresetValues(5, 20, 3, 10, 10, timeout_s=120, no_output_timeout_s=10),
            },
            domain="other",
            task="calibration",
        ),
    )
}  # fmt: skip


# TorchBench's own model names where its score V0 places them (torchbenchmark/score/score.yml
# at pytorch/benchmark 3e4aae8e, V0's last commit), and a few TorchBench models V0 left out,
# placed by their `task` attribute: a TorchBench user's results keep their weights.
TORCHBENCH_PLACEMENT: dict[str, tuple[str, str]] = {
    "pytorch_mobilenet_v3": (CV, "classification"),
    "yolov3": (CV, "detection"),
    "Background_Matting": (CV, "other computer vision"),
    "attention_is_all_you_need_pytorch": (NLP, "translation"),
    "BERT_pytorch": (NLP, "language modeling"),
    "fastNLP": (NLP, "other nlp"),
    "dlrm": ("recommendation", "recommendation"),
    "LearningToPaint": ("reinforcement learning", "other rl"),
    "moco": ("other", "other tasks"),
    "demucs": ("other", "other tasks"),
    "pytorch_struct": ("other", "other tasks"),
    # Not in V0's hierarchy; their models' own task.
    "hf_Bert": (NLP, "language modeling"),
    "hf_GPT2": (NLP, "language modeling"),
    "pytorch_unet": (CV, "segmentation"),
}


def placement(model: str) -> tuple[str, str] | None:
    """(domain, task) of a model of the catalog or of TorchBench's V0; None if neither has it."""
    if model in MODELS:
        return MODELS[model].domain, MODELS[model].task
    return TORCHBENCH_PLACEMENT.get(model)


def get_model(name: str) -> ModelDef:
    try:
        return MODELS[name]
    except KeyError:
        raise DlperfError(
            f"unknown model {name!r}{did_you_mean(name, MODELS)}; known models: "
            f"{', '.join(sorted(MODELS))}"
        ) from None


def preset_loadgen(preset: str, scenario: str | None, given: dict[str, float]) -> dict[str, float]:
    """The LoadGen settings `given` with the preset's where not given (and not at odds with
    a given maximum)."""
    if preset != "smoke" or not scenario:
        return given
    defaults = {**SMOKE_LOADGEN, **SMOKE_LOADGEN_SCENARIO.get(scenario, {})}
    for low, high in (("min_duration_s", "max_duration_s"), ("min_query_count", "max_query_count")):
        if low in defaults and given.get(high, defaults[low]) < defaults[low]:
            del defaults[low]
    return {**defaults, **given}


def preset_values(model: str, preset: str) -> PresetValues:
    if preset not in PRESETS:
        raise DlperfError(
            f"unknown preset {preset!r}{did_you_mean(preset, PRESETS)}; choose one of: "
            f"{', '.join(PRESETS)}"
        )
    return get_model(model).presets[preset]
