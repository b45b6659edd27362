"""What the microbenchmark scripts (adapters/<framework>/micro.py) count and report the same
way in every framework: parameters, FLOPs and bytes per sample, the shape line, host facts.
Standard library only."""

from __future__ import annotations

import argparse
import contextlib
import platform

INDEX_BYTES = 8  # int64 indices


def linear_params(args: argparse.Namespace) -> int:
    i, o, n = args.in_features, args.out_features, args.layers
    return (i * o + o) + (n - 1) * (o * o + o)


def linear_forward_flops(args: argparse.Namespace) -> float:
    i, o, n = args.in_features, args.out_features, args.layers
    return 2.0 * (i * o + (n - 1) * o * o)


def element_size(args: argparse.Namespace) -> int:
    """Bytes per table element: 2 when amp stores the embedding table in bf16/fp16."""
    return 2 if args.precision == "amp" else 4


def counts(args: argparse.Namespace) -> dict[str, object]:
    """params, flops_per_sample, bytes_per_sample and unit for the asked configuration."""
    train = args.mode == "train"
    if args.model == "linear":
        return {
            "params": linear_params(args),
            "flops_per_sample": linear_forward_flops(args) * (3 if train else 1),
            "bytes_per_sample": 0,
            "unit": "TF/s",
        }
    rows = args.bag_size * args.embedding_dim * element_size(args)
    return {
        "params": args.num_embeddings * args.embedding_dim,
        "flops_per_sample": 0,
        "bytes_per_sample": rows * (3 if train else 1),
        "index_bytes_per_sample": args.bag_size * INDEX_BYTES,
        "unit": "GB/s",
    }


def shape_text(args: argparse.Namespace) -> str:
    if args.model == "linear":
        return f"{args.in_features} -> {args.out_features} x {args.layers} layers"
    return f"table {args.num_embeddings:,} x {args.embedding_dim}, bags of {args.bag_size} (sum)"


def cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_native_bf16() -> bool | None:
    """Whether the CPU has bf16 matmul instructions; None if /proc/cpuinfo cannot tell."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return None


def parse_args(argv: list[str] | None, doc: str | None, threads_help: str) -> argparse.Namespace:
    """The micro.py command line, the same in every framework (see dlperf.adapter)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", choices=("linear", "embeddingbag"), required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--precision", choices=("fp32", "amp"), default="fp32")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--threads", type=int, help=threads_help)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--in-features", type=int, default=1024, help="linear: first layer's input")
    p.add_argument("--out-features", type=int, default=1024, help="linear: every layer's output")
    p.add_argument("--layers", type=int, default=4, help="linear: how many Linear layers")
    p.add_argument("--num-embeddings", type=int, default=4_800_000, help="embeddingbag: rows")
    p.add_argument("--embedding-dim", type=int, default=56, help="embeddingbag: row width")
    p.add_argument("--bag-size", type=int, default=34, help="embeddingbag: rows per sample")
    p.add_argument("--describe", action="store_true", help="print params/FLOPs/bytes and exit")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 0:
        p.error("--batch-size must be >= 1 and --steps >= 0")
    sizes = (args.in_features, args.out_features, args.layers, args.num_embeddings,
             args.embedding_dim, args.bag_size)  # fmt: skip
    if min(sizes) < 1:
        p.error("shapes (--in-features ... --bag-size) must be >= 1")
    return args
