"""The numbers every framework's workload must agree on, as pure functions of the arguments:
model shapes, FLOPs per sample, parameter targets, and the microbenchmarks' counts. Standard
library only: it runs inside each framework's env (reached through the bootstrap line, see
workload_kit).

Counting rule everywhere: a multiply-add is 2 FLOPs, and only matrix multiplications and
convolutions count (norms, activations, pooling, biases, embedding lookups and residual adds
are a few percent and left out). Training costs 3 x the forward: the backward pass computes
gradients with respect to both the activations and the weights (~2 x the forward).
"""

from __future__ import annotations

import argparse
import math

RESNET50_PARAMS = 25_557_032  # at 1000 classes, same as torchvision's resnet50
BERT_BASE_PARAMS = 110_106_428  # BertForPreTraining, tied MLM decoder counted once

# ResNet50-v1.5: (width, blocks) per stage; a bottleneck's output is 4 x its width.
RESNET50_STAGES = ((64, 3), (128, 4), (256, 6), (512, 3))
BOTTLENECK_EXPANSION = 4

BERT_BASE = {
    "vocab": 30522,
    "hidden": 768,
    "layers": 12,
    "heads": 12,
    "intermediate": 3072,
    "max_positions": 512,
    "type_vocab": 2,
}
# BERT-large: SuperBench's pytorch-bert-large sizes, and MLPerf Training's BERT.
BERT_LARGE = {**BERT_BASE, "hidden": 1024, "layers": 24, "heads": 16, "intermediate": 4096}
BERT_LN_EPS = 1e-12
BERT_DROPOUT = 0.1


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output height (or width) of a convolution or pooling window."""
    return (size + 2 * padding - kernel) // stride + 1


def resnet50_forward_flops(num_classes: int, image_size: int) -> float:
    """Forward FLOPs of one sample, convolutions and the final fc layer only: the layer shapes
    walked analytically (conv = 2 * Cin * kh * kw * Cout * Hout * Wout, linear = 2 * in * out),
    the 3x3 convolution carrying the stride (the v1.5 change). ~8.2 GFLOPs at 224x224."""

    def conv(cin: int, cout: int, k: int, size_out: int) -> int:
        return 2 * cin * k * k * cout * size_out * size_out

    size = conv_out(image_size, 7, 2, 3)
    total = conv(3, 64, 7, size)
    size = conv_out(size, 3, 2, 1)  # max pool
    in_ch = 64
    for i, (width, blocks) in enumerate(RESNET50_STAGES):
        out_ch = width * BOTTLENECK_EXPANSION
        for b in range(blocks):
            stride = 2 if (b == 0 and i > 0) else 1
            size_out = conv_out(size, 3, stride, 1)
            total += conv(in_ch, width, 1, size)  # conv1, at the input resolution
            total += conv(width, width, 3, size_out)  # conv2 carries the stride
            total += conv(width, out_ch, 1, size_out)  # conv3
            if stride != 1 or in_ch != out_ch:
                total += conv(in_ch, out_ch, 1, conv_out(size, 1, stride, 0))  # downsample
            in_ch, size = out_ch, size_out
    total += 2 * in_ch * num_classes  # fc after global average pooling
    return float(total)


def bert_forward_flops(
    seq_len: int, cfg: dict[str, int] = BERT_BASE, mlm_positions: int | None = None
) -> float:
    """Forward FLOPs of one sequence of `seq_len` tokens (BertForPreTraining).

    Per token, every dense layer costs 2 * in * out:
      - each encoder layer: Q, K, V and attention-output projections (4 * H * H) plus the
        feed-forward pair (2 * H * I);
      - the MLM head (transform H * H plus the tied decoder H * vocab) at every position, as
        the workloads compute logits everywhere; at `mlm_positions` positions where a model
        gathers the masked ones first (MLPerf's BERT: max_predictions_per_seq).
    Attention itself adds, per layer, Q @ K^T and softmax(.) @ V: 2 * S^2 * H MACs = 4 * S^2 * H
    FLOPs. The pooler (H * H) and NSP head (H * 2) run once per sequence, on the [CLS] token.
    """
    h, i, v, n = cfg["hidden"], cfg["intermediate"], cfg["vocab"], cfg["layers"]
    encoder = n * (4 * h * h + 2 * h * i) * seq_len
    mlm = (h * h + h * v) * (seq_len if mlm_positions is None else mlm_positions)
    attention = n * 4 * seq_len * seq_len * h
    heads = 2 * (h * h + h * 2)
    return float(2 * (encoder + mlm) + attention + heads)


def forward_flops(args: argparse.Namespace) -> float:
    """One forward of one sample of the workload's model (resnet50 or bert)."""
    if args.model == "resnet50":
        return resnet50_forward_flops(args.num_classes, args.image_size)
    return bert_forward_flops(args.seq_len)


def flops_per_sample(args: argparse.Namespace, forward: float | None = None) -> float:
    """What one sample costs in the asked mode: the forward when inferring, 3 x when training.
    `forward` is the forward count of a model this module does not know (the PyTorch zoo)."""
    one = forward_flops(args) if forward is None else forward
    return one if args.mode == "infer" else 3.0 * one


def shape_text(args: argparse.Namespace) -> str:
    """The input shape a workload's start line names: images or sequences."""
    image = args.model.startswith("resnet")
    return f"image {args.image_size}" if image else f"seq_len {args.seq_len}"


# --------------------------------------------------------------------------------------------
# Microbenchmarks (micro.py), after FAMBench's DLRM ubench. The host turns samples/s into
# TF/s = flops_per_sample * samples/s / 1e12 and GB/s = bytes_per_sample * samples/s / 1e9.
#
# linear        flops_per_sample = 2 * (in*out + (layers-1)*out*out) forward, x3 when training
#               (backward = activation and weight gradients, 2 GEMMs per layer), as FAMBench's
#               "Forward 2x and Backward 4x". bytes_per_sample = 0: the weights are shared by
#               the whole batch, so a per-sample byte count would depend on the batch size.
# embeddingbag  bytes_per_sample = bag_size * dim * element size of the table (the rows read),
#               x3 when training (FAMBench's FBGEMM rule: rows read forward, gradient rows read
#               and table rows read+written by the update). The int64 indices (8 bytes per row
#               looked up) are left out, as FAMBench does; the start event carries them as
#               index_bytes_per_sample. flops_per_sample = 0: a lookup is not FLOP-bound.
#
# Defaults (workload_kit.parse_micro_args):
# linear        1024 -> 1024, 4 layers: FAMBench's linear_A GEMM shape (1024-wide, the
#               batch-128..4096 rows of mlp_A) at a depth a 2-core CPU trains at batch 256 in
#               well under 0.5 s per step (6.4 GFLOP); depth only repeats the same GEMM.
#               FAMBench's own linear_A depth is --layers 20 (input, 18 hidden, output).
# embeddingbag  4,800,000 rows x 56, bags of 34: FAMBench's emb dataset "B" / "small" (a
#               1.07 GB fp32 table, far bigger than any CPU cache, which is the point).
# --------------------------------------------------------------------------------------------

INDEX_BYTES = 8  # int64 indices
# Each embeddingbag step looks up another batch of indices from a pool that together touch at
# least INDEX_POOL_BYTES of rows (or one batch per step when there are fewer steps), so
# repeated bags are not served from cache; the pool itself takes INDEX_POOL_MAX_BYTES at most.
INDEX_POOL_BYTES = 256 * 2**20
INDEX_POOL_MAX_BYTES = 64 * 2**20


def linear_sizes(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(in, out) of each Linear layer of the linear microbenchmark's stack."""
    sizes = [args.in_features] + [args.out_features] * args.layers
    return list(zip(sizes[:-1], sizes[1:], strict=True))


def index_pool_size(args: argparse.Namespace) -> int:
    """How many distinct index batches embeddingbag's steps cycle through."""
    per_batch_rows = args.batch_size * args.bag_size
    row_bytes = args.embedding_dim * element_size(args)
    wanted = math.ceil(INDEX_POOL_BYTES / (per_batch_rows * row_bytes))
    room = INDEX_POOL_MAX_BYTES // (per_batch_rows * INDEX_BYTES)
    return max(1, min(max(args.steps, 1), wanted, room))


def linear_params(args: argparse.Namespace) -> int:
    i, o, n = args.in_features, args.out_features, args.layers
    return (i * o + o) + (n - 1) * (o * o + o)


def linear_forward_flops(args: argparse.Namespace) -> float:
    i, o, n = args.in_features, args.out_features, args.layers
    return 2.0 * (i * o + (n - 1) * o * o)


def element_size(args: argparse.Namespace) -> int:
    """Bytes per table element: 2 when amp stores the embedding table in bf16/fp16."""
    return 2 if args.precision == "amp" else 4


def micro_counts(args: argparse.Namespace) -> dict[str, object]:
    """params, flops_per_sample, bytes_per_sample and unit for the asked microbenchmark."""
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


def micro_shape_text(args: argparse.Namespace) -> str:
    if args.model == "linear":
        return f"{args.in_features} -> {args.out_features} x {args.layers} layers"
    return f"table {args.num_embeddings:,} x {args.embedding_dim}, bags of {args.bag_size} (sum)"
