"""JAX: ResNet50-v1.5 and BERT-base in Flax Linen, one jax.jit-compiled train step, data
parallel through jax.sharding; several nodes joined by jax.distributed. The host never imports
jax; workload.py and micro.py run inside the isolated env.

JAX has no eager mode to set against a compiled one: every step is compiled by XLA (jax.jit),
so a jax result is always an XLA result and `--xla` is not a switch here (the workload reports
it unsupported, with that reason, rather than run the same program under another name)."""

from __future__ import annotations

from pathlib import Path

from dlperf import DlperfError
from dlperf.adapter import SEED, THREADS_MAX, WorkloadScriptAdapter, choice, flag, integer
from dlperf.launch import WORKLOAD, FrameworkLaunch, gpu_check, when
from dlperf.schema import BenchmarkSpec

OPTIONS = {
    "threads": integer(
        "XLA's CPU thread pool size (NPROC, read when jax starts its backend; default on a "
        "CPU: every CPU dlperf may use)",
        le=THREADS_MAX,
    ),
    "seed": SEED,
    "donate": flag(
        "1: donate the train state to the jitted step (donate_argnums), so XLA writes the new "
        "weights and optimizer state into the old buffers instead of new ones"
    ),
    "amp_dtype": choice(
        "with --amp: the compute dtype (weights stay float32): bfloat16, or float16 with "
        "Flax's DynamicScale loss scaling",
        "bfloat16",
        "float16",
    ),
    "latency_hiding_scheduler": flag(
        "1: XLA_FLAGS --xla_gpu_enable_latency_hiding_scheduler=true, the gradient all-reduce "
        "scheduled to overlap the backward pass (CUDA)"
    ),
}

LAUNCH = FrameworkLaunch(
    verify="import jax; print(jax.__version__)",
    cuda_check=gpu_check(
        "import jax\n"
        "def gpus():\n"
        "    try:\n"
        "        return jax.devices('gpu')\n"
        "    except RuntimeError:\n"
        "        return []",
        ("not gpus()",
         "jax {jax.__version__} sees no GPU: jax.devices('gpu') finds no CUDA backend "
         "(install jax[cuda12], or build the env with --device cuda)"),
    ),
    # One process per node, driving that node's devices; jax.distributed.initialize joins
    # them at node 0's coordinator. A CPU node emulates --devices-per-node devices.
    agent=(
        "{python}", WORKLOAD,
        "--local-devices", "{devices}",
        "--coordinator", "{master_addr}:{master_port}",
        "--num-processes", "{nodes}",
        "--process-id", "{node_rank}",
    ),
    node_env={"CUDA_VISIBLE_DEVICES": when("cuda", "{gpus}")},
)  # fmt: skip


class JaxAdapter(WorkloadScriptAdapter):
    name = "jax"
    description = "JAX + Flax Linen, every step XLA-compiled by jax.jit (so --xla is no switch)"
    models = ("resnet50", "bert")
    folder = Path(__file__).parent
    python = "3.11"
    launch = LAUNCH
    options = OPTIONS

    def check(self, spec: BenchmarkSpec) -> None:
        """Refuse a setting that would change nothing in this run (and still be recorded)."""
        if "amp_dtype" in spec.options and spec.precision != "amp":
            raise DlperfError("--set amp_dtype applies with --amp only: add --amp, or leave it out")
        if "donate" in spec.options and spec.mode != "train":
            raise DlperfError(
                "--set donate applies to training (the train state is donated); inference "
                "keeps its weights: leave it out"
            )

    def practice(self, spec: BenchmarkSpec) -> dict[str, str]:
        """JAX's own advice, each a `--set` key:

        - donate 1 (training): JAX's buffer-donation guide ("Buffer donation" in the FAQ) and
          Flax's ImageNet example (`jax.pmap(..., donate_argnums=(0,))`): the old train state
          is dead once the step returns, so XLA may update it in place.
        - amp_dtype: bfloat16 on a CPU (no loss scaling needed; oneDNN runs bf16 matmuls
          natively where the CPU has AVX512-BF16/AMX); float16 on CUDA, as Flax's ImageNet
          example runs half precision on GPUs (`jnp.float16` with `DynamicScale`) and as the
          other frameworks run --amp there, so the columns compare one precision.
        - latency_hiding_scheduler 1 (CUDA): JAX's GPU performance tips ("XLA performance
          flags": --xla_gpu_enable_latency_hiding_scheduler=true overlaps communication with
          compute in data-parallel training).

        Left out: the data layout (Flax's convolutions are NHWC only, the layout cuDNN's
        Tensor Cores and oneDNN want), XLA's GPU autotuning (on by default) and a fused
        attention kernel (jax.nn.dot_product_attention has no dropout, which BERT's attention
        probabilities take here as in the other five)."""
        out: dict[str, str] = {}
        cuda = spec.device == "cuda"
        if spec.mode == "train":
            out["donate"] = "1"
        if spec.precision == "amp":
            out["amp_dtype"] = "float16" if cuda else "bfloat16"
        if cuda and spec.mode == "train":
            out["latency_hiding_scheduler"] = "1"
        return out


ADAPTER = JaxAdapter()
