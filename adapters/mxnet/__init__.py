"""MXNet 1.9: Gluon HybridBlocks; --xla hybridizes them (static graph and memory)."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, choice, flag, integer
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check, when
from dlperf.schema import BenchmarkSpec

FOLDER = Path(__file__).parent
LAYOUT_KEYS = ("conv_layout", "batchnorm_layout", "pooling_layout")
OPTIONS = {
    "threads": integer(
        "OMP_NUM_THREADS for MXNet's CPU operators (default: MXNet's choice)", le=THREADS_MAX
    ),
    "seed": SEED,
    "optimizer_aggregation": integer(
        "weights per multi-tensor optimizer update (MXNET_OPTIMIZER_AGGREGATION_SIZE; SGD "
        "takes up to 60, AdamW up to 50; MXNet's default: SGD 4, dlperf's AdamW one weight "
        "per update)",
        le=60,
    ),
    "cuda_graphs": flag(
        "1: MXNET_ENABLE_CUDA_GRAPHS, the hybridized graph's op segments replayed as CUDA "
        "graphs (CUDA, needs --xla)"
    ),
    "forward_bulk_size": integer(
        "ops per engine bulk in the hybridized forward (hybridize's forward_bulk_size; MXNet's "
        "default 15; training with --xla)"
    ),
    "backward_bulk_size": integer(
        "ops per engine bulk in the hybridized backward (hybridize's backward_bulk_size; "
        "MXNet's default 15; training with --xla)"
    ),
}
RESNET_OPTIONS = {
    "conv_layout": choice(
        "NCHW or NHWC: the convolutions' layout (and the images'); NHWC needs cuDNN",
        "NCHW",
        "NHWC",
    ),
    "batchnorm_layout": choice(
        "NCHW or NHWC: the BatchNorms' layout (axis 1 or 3); a transpose goes wherever two "
        "neighbouring ops' layouts differ",
        "NCHW",
        "NHWC",
    ),
    "pooling_layout": choice(
        "NCHW or NHWC: the max and global-average pooling layout", "NCHW", "NHWC"
    ),
    "cudnn_autotune": choice(
        "MXNET_CUDNN_AUTOTUNE_DEFAULT: 0 cuDNN's heuristics, 1 time the conv algorithms within "
        "the workspace limit (MXNet's default), 2 the fastest at any workspace (CUDA)",
        "0",
        "1",
        "2",
    ),
}


LAUNCH = FrameworkLaunch(
    verify="import mxnet as mx; print(mx.__version__)",
    cuda_check=gpu_check(
        "import mxnet as mx\n"
        "def num_gpus():\n"
        "    try:\n"
        "        return mx.context.num_gpus()\n"
        "    except mx.base.MXNetError as exc:\n"
        "        sys.exit(f'mxnet {mx.__version__} (CUDA build) cannot count the GPUs: ' "
        "+ str(exc).strip().splitlines()[-1])",
        ("not mx.runtime.Features().is_enabled('CUDA')",
         "mxnet {mx.__version__} is a CPU-only build (no CUDA in mx.runtime.Features()); "
         "install mxnet-cu112 or another CUDA build"),
        ("num_gpus() == 0",
         "mxnet {mx.__version__} (CUDA build) sees no GPU: mx.context.num_gpus() is 0"),
    ),
    # MXNet reads its thread count at start-up, so it must come from the environment.
    thread_env=("OMP_NUM_THREADS",),
    # dist_node.py as the node agent: the ps-lite scheduler (node 0, at the master port), one
    # server per node and one worker per device, gradients summed by kvstore dist_sync.
    agent=(
        "{python}", FOLDER / "dist_node.py",
        "--node-rank", "{node_rank}", "--hosts", "{node_ips}", "--port", "{master_port}",
        "--workers", "{devices}",
        when("cpu_threads_unset", "--split-threads"),  # ranks on one host share its cores
        when("cuda", "--gpus"),
        "--", "{python}", WORKLOAD,
    ),
)  # fmt: skip


class MXNetAdapter(WorkloadScriptAdapter):
    name = "mxnet"
    description = "MXNet 1.9 Gluon (hybridize with --xla); AMP float16 on GPUs only"
    models = ("resnet50", "bert")
    folder = FOLDER
    python = "3.11"
    launch = LAUNCH
    options = OPTIONS
    model_options = {"resnet50": RESNET_OPTIONS}

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The settings MXNet's official GPU training scripts use, where MXNet 1.9.1 has them:
        NVIDIA's MXNet ResNet50 v1.5 (DeepLearningExamples MxNet/Classification/RN50v1.5:
        NHWC convolutions, BatchNorms and pooling with fp16, 60 weights per SGD update, CUDA
        graphs and bigger op bulks for the hybridized graph) and gluon-nlp's BERT pretraining
        (its BERTAdam updates 4 weights per multi-tensor AdamW call).

        Left out: what NVIDIA's container alone has (fused BatchNorm+ReLU and
        BatchNormAddRelu, MXNET_ASYNC_GPU_ENGINE), fp16 casting with `multi_precision` master
        weights (this workload's `--precision amp` is MXNet AMP, which keeps fp32 weights),
        and gluon-nlp's MXNET_SAFE_ACCUMULATION=1: under AMP, MXNet 1.9.1 already runs
        softmax, log_softmax and LayerNorm in fp32 (amp/lists/symbol_fp16.py FP32_FUNCS), and
        safe accumulation then sums those fp32 inputs in fp64 (MXNET_REAL_ACC_TYPE_SWITCH in
        src/operator/mxnet_op.h): slower, with no precision to win. MXNET_USE_FUSION is on by
        default, and MXNET_GPU_MEM_POOL_TYPE=Round (gluon-nlp) serves variable shapes, not this
        benchmark's fixed ones.

        On a CPU: NCHW everywhere, because MXNet 1.9.1's CPU convolutions take NCHW only
        (src/operator/nn/convolution-inl.h "Only support NCW, NCHW and NCDHW layout"; the
        oneDNN path refuses NHWC too; the workload reports NHWC convolutions unsupported
        there) and NHWC BatchNorm or pooling around NCHW convolutions only adds transposes.
        The optimizer aggregation is the same as on a GPU: one multi-tensor kernel per group
        of weights is the same arithmetic as one kernel per weight (verified on CPU: equal
        losses), with fewer engine operations to dispatch; speed not measured on this
        project's shared 2-core VM. cuDNN, CUDA graphs and the bulk sizes (left at MXNet's
        default, no official CPU script sets them) are not set."""
        cuda = spec.device == "cuda"
        out: dict[str, str] = {}
        if spec.mode == "train":
            # NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/runner:
            # MXNET_OPTIMIZER_AGGREGATION_SIZE=60 (multi_sgd_mom_update's maximum);
            # dmlc/gluon-nlp (v0.10.0) src/gluonnlp/optimizer/bert_adam.py: BERTAdam updates
            # MXNET_OPTIMIZER_AGGREGATION_SIZE (unset in scripts/bert/run_pretraining.py, so 4)
            # weights per multi_adamw_update.
            out["optimizer_aggregation"] = "60" if spec.model == "resnet50" else "4"
        if spec.model != "resnet50":
            return out
        # NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/runner: with --dtype
        # float16, --conv-layout NHWC --batchnorm-layout NHWC --pooling-layout NHWC (fp32 keeps
        # the NCHW defaults of its data.py); models.py inserts the transposes between them.
        nhwc = cuda and spec.precision == "amp"
        out.update(dict.fromkeys(LAYOUT_KEYS, "NHWC" if nhwc else "NCHW"))
        if not cuda:
            return out
        # apache/mxnet (1.9.1) docs/static_site/src/pages/api/faq/perf.md, "Nvidia GPU":
        # MXNET_CUDNN_AUTOTUNE_DEFAULT=1 (also MXNet's default). DeepLearningExamples' RN50v1.5
        # Dockerfile sets 0 for NVIDIA's container build; 1 times each conv algorithm once,
        # in the warm-up steps, and keeps the fastest.
        out["cudnn_autotune"] = "1"
        if spec.xla:  # both act on a hybridized static_alloc/static_shape graph only
            # NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/runner:
            # MXNET_ENABLE_CUDA_GRAPHS=1, MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_FWD=999 and
            # MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN_BWD=25 (here hybridize's bulk-size arguments).
            out["cuda_graphs"] = "1"
            if spec.mode == "train":
                out["forward_bulk_size"] = "999"
                out["backward_bulk_size"] = "25"
        return out


ADAPTER = MXNetAdapter()
