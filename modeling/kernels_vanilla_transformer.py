"""CPU kernels of the model: dropout, linear layers and the training loss.

Contract: each function is a drop-in for a plain PyTorch computation (same arguments, shapes, dtypes, gradients
and devices); only the cost differs, and only on CPU:

    apply_dropout(x, p, training)          F.dropout; on CPU the mask is a cheaper draw of the same generator and
    add_dropout(residual, x, p, training)  p is rounded to a multiple of 2**-16 (the expectation stays exact);
                                           add_dropout is residual + apply_dropout(x, p, training) in one pass
    linear(x, weight, bias), Linear        F.linear, nn.Linear; CPU fp32 and bf16 decoding steps may run on oneDNN
                                           with a packed copy of the weight (float rounding), see
                                           set_cpu_inference_gemm; inference_linear(weight, bias) is linear with
                                           what does not depend on the input decided once (decoding loops)
    smoothed_cross_entropy(logits, labels) fairseq's label-smoothed cross entropy, summed, with one fused
                                           backward (F.cross_entropy(reduction="sum") when epsilon = 0)

`quantize_int8(model)` is a copy of a model with int8 linear layers (PyTorch's dynamic quantization).

`IGNORE_INDEX` (-100) is the label value that the loss ignores: padding of the labels.
"""

from __future__ import annotations

import functools
import os
import platform
import warnings
from collections.abc import Callable, Iterable
from typing import TypeVar, cast

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.weak import WeakIdKeyDictionary

# label positions with this value are not predicted (padding); torch's cross-entropy default
IGNORE_INDEX = -100


# ----------------------------------------------------------------------------------------------------------------
# Dropout (paper section 5.4): F.dropout, with a cheaper random mask on CPU
# ----------------------------------------------------------------------------------------------------------------


class _KeepAndScale(torch.autograd.Function):
    """x * keep * scale with a precomputed boolean mask; the gradient is masked and scaled the same way."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


class _AddKeepAndScale(torch.autograd.Function):
    """residual + x * keep * scale in one pass (addcmul); gradients: grad and grad * keep * scale."""

    @staticmethod
    def forward(
        ctx, residual: torch.Tensor, x: torch.Tensor, keep: torch.Tensor, scale: float
    ) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.addcmul(residual, x, keep, value=scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        (keep,) = ctx.saved_tensors
        return grad, grad.mul(keep).mul_(ctx.scale), None, None


def _cpu_dropout_mask(x: torch.Tensor, p: float) -> tuple[torch.Tensor, float] | None:
    """(keep mask, scale) for the CPU path of `apply_dropout` in training, or None where `F.dropout` is used."""
    if (
        not 0.0 < p < 1.0
        or x.device.type != "cpu"
        or torch.compiler.is_compiling()
        or not x.is_floating_point()
    ):
        return None
    drop16 = round(p * 65536)  # out of 2**16
    if drop16 == 0:
        return None  # p below 2**-17: F.dropout keeps it exact
    n = x.numel()
    draws = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
    chunks = draws.view(torch.int16).view(-1)  # uniform on [-2**15, 2**15)
    keep = (chunks[:n] >= drop16 - 32768).view(x.shape)  # P(keep) = 1 - drop16 / 2**16
    return keep, 65536 / (65536 - drop16)


def apply_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout: zero each element with probability `p` and scale the rest by 1 / (1 - p).

    On CUDA/other devices, while compiling, and for p outside (0, 1) this is `F.dropout`. On CPU, PyTorch draws
    one random number per element from a sequential generator, which made dropout ~10% of a training step of
    the small model; here one 64-bit draw of the same (seeded, checkpointed) CPU generator gives the masks of 4
    elements (its four 16-bit chunks), so `p` is rounded to a multiple of 2**-16 (0.1 -> 0.100006) and the
    scale uses the rounded value: E[apply_dropout(x)] = x exactly."""
    if not training or p == 0.0:
        # what F.dropout returns, without its dispatch (evaluation and decoding call this ~10x a step)
        return x
    mask = _cpu_dropout_mask(x, p)
    if mask is None:
        return F.dropout(x, p=p, training=training)
    return _KeepAndScale.apply(x, *mask)


def add_dropout(residual: torch.Tensor, x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """residual + apply_dropout(x, p, training), in one pass on the CPU path (the sub-layer connection)."""
    if not training or p == 0.0:
        return residual + x
    mask = _cpu_dropout_mask(x, p)
    if mask is None or residual.shape != x.shape or residual.dtype != x.dtype:
        return residual + apply_dropout(x, p, training)
    return _AddKeepAndScale.apply(residual, x, *mask)


# ----------------------------------------------------------------------------------------------------------------
# Linear layers: nn.Linear, with oneDNN for CPU decoding where it is the faster GEMM
# ----------------------------------------------------------------------------------------------------------------

CPU_GEMM_ENV = "VANILLA_TRANSFORMER_CPU_GEMM"
CPU_GEMM_MODES = ("auto", "onednn", "default")
# requested mode (None: not read yet) and the resolved choice
_cpu_gemm: dict[str, str | bool | None] = {"mode": None, "onednn": None}
_packed_weights = WeakIdKeyDictionary()  # weight -> ((data_ptr, version), oneDNN-packed copy)


def cpu_vendor() -> str | None:
    """The CPU vendor string of /proc/cpuinfo ("GenuineIntel", "AuthenticAMD", ...), None where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _onednn_linear_available() -> bool:
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


@functools.cache
def _onednn_bf16_available() -> bool:
    """oneDNN's bf16 kernels run on this CPU (AVX512 BW/VL/DQ or AVX-NE-CONVERT); packing a bf16 weight fails
    elsewhere, where `F.linear` still computes bf16 products by PyTorch's own kernels."""
    supported = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return _onednn_linear_available() and supported is not None and bool(supported())


def set_cpu_inference_gemm(mode: str | None) -> None:
    """Choose the GEMM of CPU fp32 inference-time linear layers with few rows (decoding steps):

    * "auto" (default; also read from the environment variable VANILLA_TRANSFORMER_CPU_GEMM): oneDNN on x86 CPUs
      that are not Intel's, PyTorch's default GEMM (Intel MKL in the x86 builds) on Intel CPUs and elsewhere.
      MKL's few-row kernels are several times slower than oneDNN's on AMD CPUs (docs/benchmarks.md);
      CTranslate2 makes the same choice.
    * "onednn": oneDNN wherever PyTorch has it; "default": always `torch.nn.functional.linear`.

    None re-reads the environment variable. Training (autograd) always uses `torch.nn.functional.linear`."""
    if mode is not None and mode not in CPU_GEMM_MODES:
        raise ValueError(f"CPU GEMM mode {mode!r} is invalid: expected one of {', '.join(CPU_GEMM_MODES)}")
    _cpu_gemm["mode"], _cpu_gemm["onednn"] = mode, None


def cpu_inference_gemm() -> str:
    """The GEMM that CPU fp32 decoding uses now: "onednn" or "default" (resolving "auto" once)."""
    if _cpu_gemm["onednn"] is None:
        mode = _cpu_gemm["mode"] or os.environ.get(CPU_GEMM_ENV, "").strip().lower() or "auto"
        if mode not in CPU_GEMM_MODES:
            raise ValueError(
                f"{CPU_GEMM_ENV}={mode!r} is invalid: expected one of {', '.join(CPU_GEMM_MODES)}"
            )
        if mode == "auto":
            x86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
            vendor = cpu_vendor()
            wanted = x86 and vendor is not None and vendor != "GenuineIntel"
        else:
            wanted = mode == "onednn"
        _cpu_gemm["onednn"] = wanted and _onednn_linear_available()
    return "onednn" if _cpu_gemm["onednn"] else "default"


# Which calls go to oneDNN (measured on a 2-core AMD EPYC, docs/benchmarks.md): at most ONEDNN_MAX_ROWS rows and a
# weight of at least ONEDNN_MIN_WEIGHT elements, or ONEDNN_MIN_WEIGHT_ONE_ROW for a single row (where MKL's GEMV
# is faster on small weights). Larger calls (training, the encoder of a batch) are compute-bound on either GEMM.
ONEDNN_MAX_ROWS = 256
ONEDNN_MIN_WEIGHT = 1 << 18
ONEDNN_MIN_WEIGHT_ONE_ROW = 1 << 20


def release_cpu_inference_weights(weights: Iterable[torch.Tensor] | None = None) -> None:
    """Free the oneDNN-packed copies of `weights` (all of them when None). A packed copy is also freed with its
    weight and rebuilt when the weight changes in place or gets new storage; a model frees its own copies when it
    switches to training mode. Writes through `weight.data` are not seen by the version counter: call this after
    them."""
    if weights is None:
        _packed_weights.clear()
        return
    for weight in weights:
        _packed_weights.pop(weight, None)


def _packed_weight(weight: torch.Tensor, rows: int) -> torch.Tensor | None:
    """oneDNN's packed copy of `weight` (out, in), made once and reused while the weight is unmodified (same
    storage and version counter); None for an inference-mode weight (no version counter to check)."""
    if weight.is_inference():
        return None
    key = (weight.data_ptr(), weight._version)
    entry = _packed_weights.get(weight)
    if entry is None or entry[0] != key:
        with torch.no_grad():
            entry = (key, torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), rows))
        _packed_weights[weight] = entry
    return entry[1]


def _onednn_candidate(
    x_dtype: torch.dtype, weight: torch.Tensor, bias: torch.Tensor | None, device: str
) -> bool:
    """Whether a linear layer of these dtypes on this device may run on oneDNN (`linear`'s rule, without the row
    count): CPU, fp32 or bf16 (bf16 where this CPU runs oneDNN's bf16 kernels), all three tensors alike."""
    return (
        device == "cpu"
        and x_dtype in (torch.float32, torch.bfloat16)
        and (x_dtype != torch.bfloat16 or _onednn_bf16_available())
        and weight.dtype == x_dtype
        and (bias is None or bias.dtype == x_dtype)
    )


def _onednn_rows(rows: int, dtype: torch.dtype, size: int) -> bool:
    """Whether a call of `rows` rows with a weight of `size` elements goes to oneDNN (`ONEDNN_MAX_ROWS`, ...)."""
    # bf16: F.linear itself runs oneDNN with an unpacked weight, slower than the packed one at every size
    smallest = 0 if dtype == torch.bfloat16 else ONEDNN_MIN_WEIGHT_ONE_ROW if rows == 1 else ONEDNN_MIN_WEIGHT
    return 0 < rows <= ONEDNN_MAX_ROWS and size >= smallest


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`: (..., in) -> (..., out). Without autograd, on CPU in fp32 or bf16 (all three
    tensors alike; bf16 where this CPU runs oneDNN's bf16 kernels) and for few rows (a decoding step), it runs on
    oneDNN with a packed copy of the weight when `cpu_inference_gemm()` says so: the same product up to float
    rounding (~1e-7 relative in fp32; bf16's own products are oneDNN's either way, packed or not)."""
    if _cpu_gemm["onednn"] is False or torch.is_grad_enabled():
        # the GEMM is PyTorch's for every call (resolved), or autograd runs
        return F.linear(x, weight, bias)
    if (
        x.dim() < 2
        or not _onednn_candidate(x.dtype, weight, bias, x.device.type)
        or torch.compiler.is_compiling()
        # torch.jit documents is_tracing but leaves it out of its __all__
        or torch.jit.is_tracing()  # pyright: ignore[reportPrivateImportUsage]
        or not _onednn_rows(x.numel() // max(x.shape[-1], 1), x.dtype, weight.numel())
    ):
        return F.linear(x, weight, bias)
    packed = (
        _packed_weight(weight, x.numel() // max(x.shape[-1], 1)) if cpu_inference_gemm() == "onednn" else None
    )
    if packed is None:
        return F.linear(x, weight, bias)
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def inference_linear(
    weight: torch.Tensor, bias: torch.Tensor | None = None
) -> Callable[[torch.Tensor], torch.Tensor]:
    """`linear` with this weight and bias for calls without autograd whose input has the weight's dtype and
    device and at least 2 dimensions (a decoding loop's steps): what does not depend on the input (the GEMM, the
    dtypes, the device) is decided once here, the row count and the packed copy at each call, so that the
    function computes exactly what `linear(x, weight, bias)` computes."""
    if not (
        cpu_inference_gemm() == "onednn"
        and _onednn_candidate(weight.dtype, weight, bias, weight.device.type)
        and not weight.is_inference()
    ):
        return functools.partial(F.linear, weight=weight, bias=bias)
    dtype, size = weight.dtype, weight.numel()

    def run(x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(x.shape[-1], 1)
        if not _onednn_rows(rows, dtype, size):
            return F.linear(x, weight, bias)
        packed = _packed_weight(weight, rows)
        assert packed is not None  # not an inference-mode weight (checked above)
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")

    return run


class Linear(nn.Linear):
    """`nn.Linear` (same parameters, state dict and initialisation) computed by `linear`. `quantize_int8` gives
    it int8 weights (torch's own `quantize_dynamic` matches the exact class nn.Linear, so it needs the mapping)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


# ----------------------------------------------------------------------------------------------------------------
# int8: PyTorch's dynamic quantization (int8 weights per output channel, activations quantized per call, fbgemm)
# ----------------------------------------------------------------------------------------------------------------


def _int8_linear_class() -> type[nn.Module]:
    """torch.ao's dynamically quantized linear layer, made from any `nn.Linear` subclass (its own `from_float`
    accepts the exact classes only)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    class Int8Linear(DynamicLinear):
        @classmethod
        def from_float(cls, mod: nn.Module, use_precomputed_fake_quant: bool = False) -> nn.Module:
            # quantize_int8's mapping sends only linear layers here
            assert isinstance(mod, nn.Linear)
            plain = nn.Linear(mod.in_features, mod.out_features, bias=mod.bias is not None, device="meta")
            plain.weight, plain.bias, plain.qconfig = mod.weight, mod.bias, mod.qconfig
            return super().from_float(plain, use_precomputed_fake_quant)

    return Int8Linear


AnyModule = TypeVar("AnyModule", bound=nn.Module)


def quantize_int8(model: AnyModule) -> AnyModule:
    """A copy of the CPU fp32 `model` in which every linear layer called as a module (`Linear` and `nn.Linear`)
    computes with int8 weights, one scale per output channel, and int8 activations quantized per call
    (`torch.ao.quantization.quantize_dynamic`). The output projection stays float32: it is the (tied) embedding
    matrix, read by weight (`get_output_embeddings`). The copy is for inference: autograd does not run through
    the int8 layers. Raises `ValueError` for a model that is not on the CPU in float32."""
    from torch.ao.quantization import quantize_dynamic
    from torch.ao.quantization.qconfig import per_channel_dynamic_qconfig

    parameters = list(model.parameters())
    if any(p.device.type != "cpu" or p.dtype != torch.float32 for p in parameters):
        raise ValueError(
            "int8 quantization takes a float32 model on the CPU: load it with dtype float32, device cpu"
        )
    get_output_embeddings = getattr(model, "get_output_embeddings", None)
    output = get_output_embeddings() if get_output_embeddings is not None else None
    names = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and module is not output
    ]
    int8 = _int8_linear_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's notice that torchao is to replace it
        # a copy of the model (inplace=False), of its class
        quantized = quantize_dynamic(
            model,
            {name: per_channel_dynamic_qconfig for name in names},
            mapping={Linear: int8, nn.Linear: int8},
            inplace=False,
        )
    return cast(AnyModule, quantized)


# ----------------------------------------------------------------------------------------------------------------
# Loss: (label-smoothed) cross entropy over the target vocabulary, one fused backward
# ----------------------------------------------------------------------------------------------------------------


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Sums over the kept rows of a (N, V) fp32 logits matrix: nll = -log p[target], smooth = -sum_j log p_j, and
    loss = a * nll + b * smooth with a = 1 - eps - eps / (V - 1), b = eps / (V - 1).

    The gradient is written in one (N, V) pass, d loss / d logits = (a + b V) softmax - b - a onehot(target)
    (and softmax - onehot for nll), instead of autograd's zero-filled scatter, expanded sum and log-softmax
    backward: ~1.5x faster on (2048, 8k) and ~2x on (4096, 32k) logits on CPU, same values to fp32 rounding."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, keep: torch.Tensor, epsilon: float):
        # logits: (N, V) fp32; target: (N,) ids (anything where not kept); keep: (N,) bool
        lprobs = torch.log_softmax(logits, dim=-1)  # (N, V)
        a = 1.0 - epsilon - epsilon / (logits.shape[-1] - 1)
        b = epsilon / (logits.shape[-1] - 1)
        nll = torch.where(keep, -lprobs.gather(-1, target[:, None]).squeeze(-1), 0.0).sum()
        smooth = torch.where(keep, -lprobs.sum(-1), 0.0).sum() if b else torch.zeros_like(nll)
        ctx.save_for_backward(lprobs, target, keep)
        ctx.coefficients = (a, b)
        return a * nll + b * smooth, nll

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor, grad_nll: torch.Tensor):
        lprobs, target, keep = ctx.saved_tensors
        a, b = ctx.coefficients
        rows = keep.to(lprobs.dtype)[:, None]  # (N, 1): 0 for ignored positions
        onehot_scale = rows * (grad_loss * a + grad_nll)  # (N, 1)
        grad = torch.exp(lprobs).mul_(onehot_scale + rows * (grad_loss * b * lprobs.shape[-1]))  # (N, V)
        if b:
            grad.sub_(rows * (grad_loss * b))
        grad.scatter_add_(-1, target[:, None], -onehot_scale)
        return grad, None, None, None


def smoothed_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, epsilon: float = 0.0, ignore_index: int = IGNORE_INDEX
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss_sum, nll_sum)`` of (..., V) logits against (...) labels, in fp32, over positions whose label is not
    ``ignore_index``. ``epsilon`` is fairseq's label smoothing: the target distribution puts 1 - epsilon on the
    label and epsilon / (V - 1) on every other token; with epsilon = 0 both sums are the plain cross entropy."""
    keep = labels != ignore_index
    target = labels.masked_fill(~keep, 0)
    return _SmoothedCrossEntropy.apply(
        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), keep.reshape(-1), float(epsilon)
    )


def token_loss(
    logits: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None = None
) -> torch.Tensor:
    """The loss of every LM head: the cross entropy of (..., V) logits against (...) labels, summed over the
    labelled positions (not IGNORE_INDEX) and divided by `num_items_in_batch` (Trainer's count of them in all the
    batches of one update), or by this batch's count when it is None: the mean. NaN when nothing is labelled."""
    loss_sum, _ = smoothed_cross_entropy(logits, labels)
    count = (labels != IGNORE_INDEX).sum() if num_items_in_batch is None else num_items_in_batch
    return loss_sum / count
