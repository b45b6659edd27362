"""TensorFlow: Keras layers with a custom training step in tf.function; --xla = jit_compile."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, choice, integer
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check, when
from dlperf.schema import BenchmarkSpec

CONV_MODELS = ("resnet50",)


OPTIONS = {
    "threads": integer("intra-op threads (default: TensorFlow's own choice)", le=THREADS_MAX),
    "seed": SEED,
    "gpu_thread_mode": choice(
        "TF_GPU_THREAD_MODE: global (TensorFlow's default), gpu_private (each GPU launches its "
        "kernels from 2 threads of its own) or gpu_shared",
        "global",
        "gpu_private",
        "gpu_shared",
    ),
}
DATA_FORMAT = choice(
    "channels_last (NHWC) or channels_first (NCHW) images and convs",
    "channels_last",
    "channels_first",
)

LAUNCH = FrameworkLaunch(
    verify="import tensorflow as tf; print(tf.__version__)",
    cuda_check=gpu_check(
        "import os\nos.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')\nimport tensorflow as tf",
        ("not tf.config.list_physical_devices('GPU')",
         "tensorflow {tf.__version__} (CUDA build: {tf.test.is_built_with_cuda()}) sees no GPU: "
         'tf.config.list_physical_devices("GPU") is empty'),
    ),
    env={"TF_CPP_MIN_LOG_LEVEL": "2"},  # quiet C++ start-up chatter; errors still show
    # One MultiWorkerMirroredStrategy worker per node, driving that node's devices; TF_CONFIG
    # lists every worker.
    agent=("{python}", WORKLOAD),
    node_env={"TF_CONFIG": "{tf_config_ports}"},
    refuse=(
        when(
            "cpu_several_devices",
            "tensorflow runs one worker per node, and a CPU is one TensorFlow device: use "
            "--devices-per-node 1 with --nodes N on CPU",
        ),
    ),
)  # fmt: skip


class TensorFlowAdapter(WorkloadScriptAdapter):
    name = "tensorflow"
    description = "TensorFlow 2 / Keras 3 in tf.function (XLA jit_compile with --xla)"
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    launch = LAUNCH
    options = OPTIONS
    model_options = {m: {"data_format": DATA_FORMAT} for m in CONV_MODELS}

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The settings TensorFlow's own ResNet50/BERT GPU training scripts use, each cited below.

        On CUDA: the GPU thread mode gpu_private for both models, and for ResNet50 the layout
        TensorFlow itself prefers for the precision: channels_first (NCHW) in fp32, as
        tf-models' legacy ResNet and NVIDIA's scripts build it; channels_last (NHWC, what
        Tensor Cores take) under mixed float16, as Model Garden's current GPU config builds it
        (the older scripts keep NCHW there too and leave the switch to Grappler). Grappler's
        layout optimizer draws the same line: it re-lays out a GPU graph to NCHW unless most
        convolutions are fp16 on Volta or newer (then NHWC). Under --xla Grappler does not
        run, so the layout built is the layout XLA starts from.

        On a CPU: channels_last, and no thread mode. TensorFlow's own CPU convolutions are
        NHWC-only (NCHW runs only through the oneDNN kernels, and Keras 3 transposes around
        every NCHW pooling), tf-models' ResNet picks channels_last when there is no GPU, and
        TF_GPU_THREAD_MODE only changes the threads that launch GPU kernels.

        Left out, as not real or not a switch here: a fused / multi-tensor optimizer (Keras 3's
        optimizers update variable by variable; the fused kernels were tf.keras 2's), cuDNN's
        persistent batch norm (TF_USE_CUDNN_BATCHNORM_SPATIAL_PERSISTENT, in tf-models and
        NVIDIA's scripts) because it acts on FusedBatchNormV3 and Keras 3's BatchNormalization
        is built from moments and elementwise ops; TF_GPU_THREAD_COUNT (2, the count those
        scripts set, is TensorFlow's default); XLA, mixed precision and its dynamic loss scale,
        which are the spec's own --xla and --precision axes."""
        out: dict[str, str] = {}
        cuda = spec.device == "cuda"
        if spec.model in CONV_MODELS:
            if not cuda:
                # tensorflow/models official/legacy/image_classification/resnet/
                # resnet_ctl_imagenet_main.py: channels_last when no GPU is present.
                out["data_format"] = "channels_last"
            elif spec.precision == "amp":
                # tensorflow/models official/vision/configs/experiments/image_classification/
                # imagenet_resnet50_gpu.yaml (mixed_precision_dtype float16, input [224, 224, 3],
                # the backbone in Keras's default channels_last); tensorflow/tensorflow
                # tensorflow/core/grappler/optimizers/generic_layout_optimizer.cc (NHWC when
                # most GPU convolutions are fp16 on compute capability >= 7.0).
                out["data_format"] = "channels_last"
            else:
                # tensorflow/models official/legacy/image_classification/resnet/
                # resnet_ctl_imagenet_main.py (channels_first when a GPU is present);
                # NVIDIA/DeepLearningExamples TensorFlow/Classification/ConvNets/utils/
                # cmdline_helper.py (--data_format default NCHW) and
                # TensorFlow2/Classification/ConvNets/config/defaults.py (channels_first).
                out["data_format"] = "channels_first"
        if cuda:
            # tensorflow/models official/utils/misc/keras_utils.py
            # (set_gpu_thread_mode_and_count), set by official/benchmark/
            # keras_imagenet_benchmark.py ("Thread tuning to improve performance") and
            # bert_squad_benchmark.py; NVIDIA/DeepLearningExamples
            # TensorFlow/Classification/ConvNets/runtime/runner.py (TF_GPU_THREAD_MODE).
            out["gpu_thread_mode"] = "gpu_private"
        return out


ADAPTER = TensorFlowAdapter()
