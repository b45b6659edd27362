"""OneFlow: ResNet50-v1.5 and BERT-base training written with oneflow.nn (eager), synthetic data.

The host never imports oneflow; workload.py runs inside the isolated env. OneFlow 0.9.0 ships
only a CUDA 11 wheel for CPython 3.10; that one build serves both the cpu and cuda variants, and
needs cuDNN/cuBLAS shared libraries (pip wheels) on LD_LIBRARY_PATH even to run on the CPU.
"""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, choice, flag, integer
from dlperf.events import ONEFLOW_SINGLE_HOST_ENV
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check, when
from dlperf.schema import BenchmarkSpec

OPTIONS = {
    "threads": integer(
        "CPU intra-op threads (OMP_NUM_THREADS / ONEFLOW_NUM_THREADS-style; default: OneFlow's "
        "own choice)",
        le=THREADS_MAX,
    ),
    "seed": SEED,
    "fuse_add_to_output": flag("1: nn.Graph config.allow_fuse_add_to_output (with --xla)"),
    "fuse_model_update_ops": flag(
        "1: nn.Graph config.allow_fuse_model_update_ops (with --xla, training)"
    ),
    "fuse_cast_scale": flag(
        "1: nn.Graph config.allow_fuse_cast_scale (with --xla, training; acts on AMP's casts)"
    ),
}
MODEL_OPTIONS = {
    "resnet50": {
        "channels_last": flag(
            "1: NHWC model and images (ONEFLOW_ENABLE_NHWC=1; turned off where OneFlow's NHWC "
            "kernels give other numbers than NCHW, as on a CPU)"
        ),
        "fuse_bn_relu": flag("1: nn.FusedBatchNorm2d, one kernel for BatchNorm + ReLU"),
        "fuse_bn_add_relu": flag(
            "1: nn.FusedBatchNorm2d, one kernel for BatchNorm + shortcut add + ReLU"
        ),
        "cudnn_conv_algo": choice(
            "search: cuDNN tries the conv algorithms once (OneFlow's dry run); heuristic: "
            "OneFlow's default (CUDA)",
            "heuristic",
            "search",
        ),
    },
    "bert": {
        "bias_gelu_fusion": flag("1: flow._C.fused_bias_add_gelu in the feed-forward (LiBai)"),
        "bias_dropout_fusion": flag(
            "1: flow._C.fused_bias_add_dropout after the output projections (LiBai)"
        ),
        "scale_mask_softmax_fusion": flag(
            "1: flow._C.fused_scale_mask_softmax_dropout for the attention probabilities (LiBai)"
        ),
    },
}

LAUNCH = FrameworkLaunch(
    verify="import oneflow; print(oneflow.__version__)",
    cuda_check=gpu_check(
        "import oneflow as flow",
        ("not flow.cuda.is_available()",
         "oneflow {flow.__version__} sees no usable GPU: oneflow.cuda.is_available() is False"),
    ),
    env={"GLOG_minloglevel": "2"},
    # OneFlow's CPU kernels (oneDNN/OpenMP) read the thread count at import time.
    thread_env=("OMP_NUM_THREADS", "MKL_NUM_THREADS"),
    # oneflow.distributed.launch as the node agent: one process per device, gradients
    # all-reduced by DistributedDataParallel (OneFlow's own ring over its transport on CPU,
    # NCCL on CUDA). The launcher kills its process group and exits non-zero when a rank
    # fails; a rank whose peer died aborts by itself too (its transport socket breaks, or the
    # control heartbeat, every 7-13 s, reports "Machine N lost").
    agent=(
        "{python}", "-m", "oneflow.distributed.launch",
        "--nnodes", "{nodes}", "--node_rank", "{node_rank}", "--nproc_per_node", "{devices}",
        "--master_addr", "{master_addr}", "--master_port", "{master_port}",
        # GLOG_log_dir of each rank (OneFlow's C++ log files, if it writes any)
        "--logdir", "{log_dir}/oneflow-node{node_rank}",
        WORKLOAD,
    ),
    # OneFlow tells nodes apart by the IP address each rank reaches the master from, never by
    # --node_rank: nodes on one host (every loopback address connects from 127.0.0.1) are one
    # OneFlow node, and the workload must then take its global rank as LOCAL_RANK (see the note
    # at the top of workload.py). Distinct loopback addresses cannot help: the kernel picks
    # 127.0.0.1 as the source of every connection to 127.0.0.0/8.
    node_env={ONEFLOW_SINGLE_HOST_ENV: when("one_host", "1")},
)  # fmt: skip


class OneFlowAdapter(WorkloadScriptAdapter):
    name = "oneflow"
    description = (
        "OneFlow eager (oneflow.nn.Graph with --xla), bf16 autocast on CPU / fp16 + GradScaler "
        "on CUDA"
    )
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.10"
    launch = LAUNCH
    options = OPTIONS
    model_options = MODEL_OPTIONS

    def lib_dirs(self, device: str) -> tuple[str, ...]:
        # site-packages-relative folders of the nvidia-cudnn-cu11 / nvidia-cublas-cu11 wheels
        return ("nvidia/cudnn/lib", "nvidia/cublas/lib")

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The settings of OneFlow's own GPU training scripts for OneFlow 0.9 (each source
        below), where this workload can take them (eager, or nn.Graph with --xla):

        ResNet50 (Oneflow-Inc/models Vision/classification/image/resnet50): its fp16 and fp32
        example scripts (examples/train_graph_distributed_fp16.sh, ..._fp32.sh) both pass
        `--fuse-bn-relu --fuse-bn-add-relu`; only the fp16 one passes `--channel-last` (NHWC
        feeds the tensor cores; models/resnet50.py and models/data.py set ONEFLOW_ENABLE_NHWC=1
        then). Its TrainGraph (graph.py) sets allow_fuse_add_to_output,
        allow_fuse_model_update_ops, and enable_cudnn_conv_heuristic_search_algo(False) on one
        node ("dry-run is better with single device"), True across nodes. Upstream also pads
        the images to 4 channels for NHWC; that adds conv1 weights, so it is left out here (a
        layout setting must not change the model).

        BERT (Oneflow-Inc/libai; the v0.3.0 installation guide installs oneflow==0.9.0):
        configs/common/models/bert.py turns on bias_gelu_fusion, bias_dropout_fusion and
        scale_mask_softmax_fusion; its graphs (libai/models/utils/graph_base.py, on by default
        in configs/common/models/graph.py) set allow_fuse_add_to_output,
        allow_fuse_model_update_ops and allow_fuse_cast_scale.

        The graph settings are passed only with --xla (nn.Graph), the optimizer's and grad
        scaling's only when training; the inference graph gets add-to-output only, as
        models' EvalGraph does.

        On a CPU: the fused batch norms stay on (OneFlow 0.9 has a CPU normalization_add_relu
        kernel that applies the add and ReLU in the normalization pass; losses match the unfused
        model exactly here; fewer passes over the activations, not timed on this shared VM),
        and so do the nn.Graph passes (graph rewrites; losses match). Off:
        channels_last (OneFlow 0.9's CPU conv and batch norm kernels accept NHWC tensors and
        return wrong numbers), the BERT fusions (no CPU kernels for fused_bias_add_gelu,
        fused_bias_add_mask_scale or fused_scale_mask_softmax_dropout), cuDNN (CUDA only). The
        workload checks each setting it is given and turns off, with the reason in its start
        event, any that cannot run correctly on the device."""
        cuda = spec.device == "cuda"
        train = spec.mode == "train"
        out: dict[str, str] = {}
        if spec.model == "resnet50":
            # Oneflow-Inc/models Vision/classification/image/resnet50/
            # examples/train_graph_distributed_fp16.sh: --channel-last (the fp32 one: none)
            out["channels_last"] = "1" if cuda and spec.precision == "amp" else "0"
            # the same examples/train_graph_distributed_fp{16,32}.sh: --fuse-bn-relu
            # --fuse-bn-add-relu
            out["fuse_bn_relu"] = "1"
            out["fuse_bn_add_relu"] = "1"
            if cuda and train:
                # Oneflow-Inc/models .../resnet50/graph.py (TrainGraph):
                # enable_cudnn_conv_heuristic_search_algo(False) on one node, True on several
                out["cudnn_conv_algo"] = "search" if spec.nodes == 1 else "heuristic"
        if spec.model == "bert":
            # Oneflow-Inc/libai configs/common/models/bert.py: *_fusion=True (CUDA kernels)
            fused = "1" if cuda else "0"
            out["bias_gelu_fusion"] = fused
            out["bias_dropout_fusion"] = fused
            out["scale_mask_softmax_fusion"] = fused
        if spec.xla:
            # Oneflow-Inc/models .../resnet50/graph.py (TrainGraph, EvalGraph) and
            # Oneflow-Inc/libai libai/models/utils/graph_base.py
            out["fuse_add_to_output"] = "1"
            if train:
                out["fuse_model_update_ops"] = "1"
                if spec.model == "bert" and cuda:
                    # Oneflow-Inc/libai libai/models/utils/graph_base.py:
                    # allow_fuse_cast_scale (AMP's casts; graph AMP is CUDA fp16 only here)
                    out["fuse_cast_scale"] = "1"
        return out


ADAPTER = OneFlowAdapter()
