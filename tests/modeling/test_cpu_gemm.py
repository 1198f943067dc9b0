"""The oneDNN path of CPU inference linear layers (`kernels_vanilla_transformer.linear`): the same values as
`F.linear`, taken only where it should be (no autograd, CPU fp32, few rows, large enough weights, mode), and a
packed weight that follows in-place updates. The thresholds are lowered so that tiny models take the path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import tiny_config

import vanilla_transformer.modeling.kernels_vanilla_transformer as mv
from vanilla_transformer.modeling import VanillaTransformerForConditionalGeneration

pytestmark = pytest.mark.skipif(not mv._onednn_linear_available(), reason="this PyTorch build has no oneDNN")


@pytest.fixture
def onednn(monkeypatch):
    """Force the oneDNN path for every weight size; counts the packed-weight lookups."""
    monkeypatch.setattr(mv, "ONEDNN_MIN_WEIGHT", 0)
    monkeypatch.setattr(mv, "ONEDNN_MIN_WEIGHT_ONE_ROW", 0)
    calls = []
    real = mv._packed_weight

    def counting(weight, rows):
        calls.append(rows)
        return real(weight, rows)

    monkeypatch.setattr(mv, "_packed_weight", counting)
    mv.set_cpu_inference_gemm("onednn")
    yield calls
    mv.set_cpu_inference_gemm(None)


@pytest.mark.parametrize("shape", [(1, 32), (5, 32), (2, 3, 32), (4, 1, 32)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_onednn_linear_matches_f_linear(onednn, shape, with_bias):
    torch.manual_seed(0)
    weight = torch.randn(48, 32)
    bias = torch.randn(48) if with_bias else None
    x = torch.randn(*shape)
    with torch.no_grad():
        got = mv.linear(x, weight, bias)
    assert onednn, "the oneDNN path was not taken"
    assert got.shape == (*shape[:-1], 48)
    torch.testing.assert_close(got, F.linear(x, weight, bias), rtol=1e-5, atol=1e-5)


def test_one_dimensional_input_and_transposed_weight(onednn):
    torch.manual_seed(0)
    weight, x = torch.randn(24, 16).t(), torch.randn(24)  # weight (16, 24) stored column-major; x is 1-D
    with torch.no_grad():
        torch.testing.assert_close(mv.linear(x, weight), F.linear(x, weight))  # 1-D: F.linear itself
        assert not onednn
        batch = torch.randn(3, 24)
        torch.testing.assert_close(mv.linear(batch, weight), F.linear(batch, weight), rtol=1e-5, atol=1e-5)
    assert onednn == [3]


def test_onednn_linear_takes_non_contiguous_input(onednn):
    torch.manual_seed(0)
    weight, x = torch.randn(16, 24), torch.randn(24, 6).t()  # (6, 24), column-major
    with torch.inference_mode():
        got = mv.linear(x, weight)
    torch.testing.assert_close(got, x @ weight.t(), rtol=1e-5, atol=1e-5)


def test_packed_weight_follows_in_place_updates_and_new_storage(onednn):
    torch.manual_seed(0)
    layer = mv.Linear(32, 40)
    x = torch.randn(3, 32)
    with torch.no_grad():
        before = layer(x)
        layer.weight.mul_(2.0)  # in place: the version counter moves
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
        layer.load_state_dict({"weight": torch.randn(40, 32), "bias": torch.zeros(40)})
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
        layer.weight = torch.nn.Parameter(torch.randn(40, 32))  # a new tensor
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(before, layer(x).detach())
    mv.release_cpu_inference_weights()
    assert len(mv._packed_weights) == 0


def test_path_is_skipped_where_it_must_be(onednn):
    weight = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(2, 8)
    y = mv.linear(x, weight)  # autograd: F.linear, gradients flow
    y.sum().backward()
    assert weight.grad is not None and not onednn
    with torch.no_grad():
        mv.linear(x.double(), weight.detach().double())  # not fp32
        mv.linear(torch.randn(mv.ONEDNN_MAX_ROWS + 1, 8), weight)  # too many rows
    assert not onednn
    mv.set_cpu_inference_gemm("default")
    with torch.no_grad():
        mv.linear(x, weight)
    assert not onednn
    mv.set_cpu_inference_gemm("onednn")
    with torch.no_grad():
        mv.linear(x, weight)
    assert onednn == [2]


@pytest.fixture
def restore_mode():
    yield
    mv.set_cpu_inference_gemm(None)


def test_mode_values_and_environment(monkeypatch, restore_mode):
    with pytest.raises(ValueError, match="expected one of auto, onednn, default"):
        mv.set_cpu_inference_gemm("mkl")
    monkeypatch.setenv(mv.CPU_GEMM_ENV, "bogus")
    mv.set_cpu_inference_gemm(None)
    with pytest.raises(ValueError, match="VANILLA_TRANSFORMER_CPU_GEMM='bogus' is invalid"):
        mv.cpu_inference_gemm()
    monkeypatch.setenv(mv.CPU_GEMM_ENV, "default")
    mv.set_cpu_inference_gemm(None)
    assert mv.cpu_inference_gemm() == "default"
    monkeypatch.setenv(mv.CPU_GEMM_ENV, "onednn")
    mv.set_cpu_inference_gemm(None)
    assert mv.cpu_inference_gemm() == "onednn"
    monkeypatch.setattr(mv, "cpu_vendor", lambda: "GenuineIntel")
    mv.set_cpu_inference_gemm("auto")
    assert mv.cpu_inference_gemm() == "default"  # Intel CPUs keep PyTorch's MKL
    monkeypatch.setattr(mv, "cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.setattr(mv.platform, "machine", lambda: "x86_64")
    mv.set_cpu_inference_gemm("auto")
    assert mv.cpu_inference_gemm() == "onednn"
    monkeypatch.setattr(mv, "cpu_vendor", lambda: None)
    mv.set_cpu_inference_gemm("auto")
    assert mv.cpu_inference_gemm() == "default"  # unknown vendor: PyTorch's default


def test_generation_with_onednn_equals_default_gemm(onednn):
    """Greedy and beam search give the same tokens (and near-identical scores) through either GEMM."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    ids = torch.randint(4, model.config.vocab_size, (3, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    kwargs = dict(
        input_ids=ids, attention_mask=mask, max_new_tokens=8, output_scores=True, return_dict_in_generate=True
    )
    results = {}
    for mode in ("default", "onednn"):
        mv.set_cpu_inference_gemm(mode)
        onednn.clear()
        with torch.inference_mode():
            results[mode] = [model.generate(num_beams=b, **kwargs) for b in (1, 3)]
        assert bool(onednn) == (mode == "onednn")
    for default, fast in zip(results["default"], results["onednn"]):
        assert torch.equal(default.sequences, fast.sequences)
        for a, b in zip(default.scores, fast.scores):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    mv.release_cpu_inference_weights()


def test_model_with_packed_weights_can_be_copied_and_pickled(onednn):
    import copy
    import pickle

    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    ids = torch.randint(4, model.config.vocab_size, (2, 5))
    with torch.no_grad():
        out = model.generate(input_ids=ids, max_new_tokens=4)
    assert len(mv._packed_weights) > 0
    clone = copy.deepcopy(model)
    again = pickle.loads(pickle.dumps(model))
    with torch.no_grad():
        assert torch.equal(clone.generate(input_ids=ids, max_new_tokens=4), out)
        assert torch.equal(again.generate(input_ids=ids, max_new_tokens=4), out)
    mv.release_cpu_inference_weights()


def test_training_mode_frees_the_models_packed_weights(onednn):
    """eval() + generate() on the oneDNN path packs weights; model.train() frees this model's packed copies
    (and only those): the updates to come would make them stale."""
    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config()).eval()
    other = mv.Linear(32, 40)
    ids = torch.randint(4, model.config.vocab_size, (2, 5))
    with torch.no_grad():
        model.generate(input_ids=ids, max_new_tokens=4)
        other(torch.randn(3, 32))
    weights = list(model.parameters())
    assert any(w in mv._packed_weights for w in weights) and other.weight in mv._packed_weights
    model.eval()  # leaving training mode keeps them
    assert any(w in mv._packed_weights for w in weights)
    model.train()
    assert not any(w in mv._packed_weights for w in weights)
    assert other.weight in mv._packed_weights
    mv.release_cpu_inference_weights()


# ---- int8 ------------------------------------------------------------------------------------------------------


def test_quantize_int8_matches_torch_dynamic_linear_and_keeps_the_model():
    """quantize_int8: every linear layer called as a module becomes torch's dynamic int8 linear layer and computes
    exactly what torch.ao's own conversion of a plain nn.Linear with the same weights computes; the output
    projection (read by weight) stays float32; the source model and its state dict are unchanged; greedy and beam
    decoding run, with logits near the float32 model's."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
    from torch.ao.quantization.qconfig import per_channel_dynamic_qconfig

    torch.manual_seed(0)
    model = VanillaTransformerForConditionalGeneration(tiny_config(d_model=64)).eval()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    int8 = mv.quantize_int8(model)
    layers = dict(int8.named_modules())
    source = dict(model.named_modules())
    linears = [name for name, module in source.items() if isinstance(module, torch.nn.Linear)]
    assert "lm_head" in linears and type(layers["lm_head"]) is mv.Linear
    assert all(isinstance(layers[name], DynamicLinear) for name in linears if name != "lm_head")
    assert all(torch.equal(before[name], tensor) for name, tensor in model.state_dict().items())
    assert type(source["model.encoder.layers.0.ffn.fc1"]) is mv.Linear

    original = source["model.encoder.layers.0.ffn.fc1"]
    plain = torch.nn.Linear(original.in_features, original.out_features)
    plain.load_state_dict(original.state_dict())
    # torch types Module.__setattr__ for tensors and modules only; qconfig is the attribute torch.ao reads
    plain.qconfig = per_channel_dynamic_qconfig  # pyright: ignore[reportArgumentType]
    reference = DynamicLinear.from_float(plain)
    x = torch.randn(5, original.in_features)
    assert torch.equal(layers["model.encoder.layers.0.ffn.fc1"](x), reference(x))

    ids = torch.randint(4, model.config.vocab_size, (3, 7))
    with torch.no_grad():
        target = model.generate(input_ids=ids, max_new_tokens=6)
        full, quantized = (m(input_ids=ids, decoder_input_ids=target).logits for m in (model, int8))
        assert int8.generate(input_ids=ids, max_new_tokens=6, num_beams=3).shape[0] == 3
    assert 0 < (full - quantized).abs().max() < 0.25 * full.std()
    with pytest.raises(ValueError, match="float32 model on the CPU"):
        # transformers wraps PreTrainedModel.to with functools.wraps(nn.Module.to), so checkers see an unbound method
        mv.quantize_int8(model.to(torch.bfloat16))  # pyright: ignore[reportArgumentType]
