"""PaddlePaddle: ResNet50-v1.5 and BERT-base training written with paddle.nn (dygraph),
synthetic data. The host never imports paddle; workload.py runs inside the isolated env."""

from __future__ import annotations

from pathlib import Path

from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, choice, flag, integer
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check, when
from dlperf.schema import BenchmarkSpec

# paddlepaddle-gpu wheels live on Paddle's own index (CUDA 12.6 build); PyPI has the CPU wheel.
CUDA_INDEX = "https://www.paddlepaddle.org.cn/packages/stable/cu126/"

OPTIONS = {
    "threads": integer(
        "CPU math threads (OMP/MKL) in the workload (default: Paddle's own choice)",
        le=THREADS_MAX,
    ),
    "seed": SEED,
    "amp_level": choice(
        "with --precision amp: O1 (white-listed ops in fp16) or O2 (fp16 weights and "
        "activations, fp32 master weights in the optimizer)",
        "O1",
        "O2",
    ),
}
# Best-practice keys that only ResNet50 takes (convolutions, batch norm, Momentum).
RESNET_OPTIONS = {
    "data_format": choice(
        "NCHW or NHWC: the layout of the images and every conv/BN/pool layer", "NCHW", "NHWC"
    ),
    "multi_tensor": flag(
        "1: Momentum(use_multi_tensor=True), one merged update for all parameters"
    ),
    "cudnn_exhaustive_search": flag(
        "1: FLAGS_cudnn_exhaustive_search, cuDNN benchmarks every conv algorithm once and "
        "keeps the fastest (CUDA)"
    ),
    "conv_workspace_size_limit": integer(
        "FLAGS_conv_workspace_size_limit in MB: the scratch memory a cuDNN conv algorithm may "
        "use (Paddle's default 512; CUDA)",
        le=1 << 20,
    ),
    "cudnn_batchnorm_spatial_persistent": flag(
        "1: FLAGS_cudnn_batchnorm_spatial_persistent, cuDNN's persistent batch-norm kernels "
        "(the fast NHWC fp16 path; CUDA)"
    ),
}


LAUNCH = FrameworkLaunch(
    verify="import paddle; print(paddle.__version__)",
    cuda_check=gpu_check(
        "import paddle",
        ("not paddle.device.is_compiled_with_cuda()",
         "paddle {paddle.__version__} is a CPU-only build: "
         "paddle.device.is_compiled_with_cuda() is False"),
        ("paddle.device.cuda.device_count() < 1",
         "paddle {paddle.__version__} (CUDA build) sees no GPU: "
         "paddle.device.cuda.device_count() is 0"),
    ),
    env={"GLOG_minloglevel": "2"},
    # Paddle's CPU kernels read the thread count from OMP/MKL at import time.
    thread_env=("OMP_NUM_THREADS", "MKL_NUM_THREADS"),
    # paddle.distributed.launch as the node agent (one worker per device, DataParallel; gloo
    # on CPU, NCCL on CUDA); every worker's log goes to the repeat's raw folder.
    agent=(
        "{python}", "-m", "paddle.distributed.launch",
        "--nnodes", "{nodes}", "--master", "{master_addr}:{master_port}",
        "--rank", "{node_rank}", "--nproc_per_node", "{devices}",
        "--log_dir", "{log_dir}/paddle-node{node_rank}", "--max_restart", "0",
        when("cuda", "--devices", "{gpus}"),
        WORKLOAD,
    ),
)  # fmt: skip


class PaddleAdapter(WorkloadScriptAdapter):
    name = "paddle"
    description = (
        "PaddlePaddle dygraph (paddle.jit.to_static with --xla), bf16 autocast on CPU / "
        "fp16 + GradScaler on CUDA"
    )
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    launch = LAUNCH
    options = OPTIONS
    model_options = {"resnet50": RESNET_OPTIONS}

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """The settings Paddle's own GPU training configs use, each cited below: PaddleClas's
        ResNet50 AMP config (NHWC, AMP O2 with fp32 master weights, multi-tensor Momentum), the
        cuDNN flags PaddleClas's training engine and benchmark scripts set, and PaddleNLP's BERT
        pretraining script (AMP O2). Read at PaddleClas d178931 (2024-10) and PaddleNLP 03626da.

        On a CPU: NCHW, because Paddle's CPU convolution (im2col + GEMM) computes in NCHW and
        transposes NHWC input and output around every conv (Paddle
        paddle/phi/kernels/impl/conv_kernel_impl.h), and NHWC is the layout the official configs
        pick only for fp16 on tensor cores; multi-tensor Momentum on, since it is the same
        arithmetic in one merged op instead of one op per parameter (verified to train the same
        on CPU, speed not measured on this project's shared 2-core VM); no cuDNN flags; and no
        AMP level, as Paddle 3.x's auto_cast does nothing on a CPU (the workload reports an amp
        run there unsupported)."""
        cuda = spec.device == "cuda"
        amp = spec.precision == "amp"
        out: dict[str, str] = {}
        if amp and cuda:
            # PaddlePaddle/PaddleClas ppcls/configs/ImageNet/ResNet/ResNet50_amp_O2_ultra.yaml
            # (AMP.level: O2, Optimizer.multi_precision: True) and PaddlePaddle/PaddleNLP
            # model_zoo/bert/run_pretrain.py (--amp_level default "O2").
            out["amp_level"] = "O2"
        if spec.model != "resnet50":
            return out
        # NHWC only with fp16: PaddleClas ResNet50_amp_O2_ultra.yaml (Arch.data_format: "NHWC")
        # and test_tipc/configs/ResNet/ResNet50_NHWC_bs256_train_infer_python.txt (fp16 only);
        # its fp32 configs (ResNet50.yaml, ResNet50_fp32_ultra.yaml) keep the default NCHW.
        out["data_format"] = "NHWC" if cuda and amp else "NCHW"
        if spec.mode == "train":
            # PaddlePaddle/PaddleClas ppcls/optimizer/optimizer.py: Momentum is built with
            # use_multi_tensor=True wherever the installed paddle has it.
            out["multi_tensor"] = "1"
        if cuda:
            # PaddlePaddle/PaddleClas ppcls/static/train.py and
            # test_tipc/static/ResNet50/benchmark_common/run_benchmark.sh.
            out["cudnn_exhaustive_search"] = "1"
            # PaddlePaddle/PaddleClas test_tipc/configs/ResNet/ResNet50_train_infer_python.txt
            # (train_benchmark_params flags: FLAGS_conv_workspace_size_limit=4096, fp32 and fp16).
            out["conv_workspace_size_limit"] = "4096"
            # PaddlePaddle/PaddleClas ppcls/engine/engine.py (_init_amp): set with AMP only.
            out["cudnn_batchnorm_spatial_persistent"] = "1" if amp else "0"
        return out

    def pip_args(self, device: str) -> tuple[str, ...]:
        return ("--extra-index-url", CUDA_INDEX) if device == "cuda" else ()


ADAPTER = PaddleAdapter()
