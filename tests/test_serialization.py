"""tinytorch.save / load: round trips, map_location, atomic writes, weights_only, corruption errors."""
import io
import os
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.optim as optim
from tinytorch.serialization import END_MAGIC, MAGIC


def _checkpoint():
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    opt = optim.AdamW(model.parameters(), lr=0.01)
    model(tinytorch.randn(5, 3)).sum().backward()
    opt.step()
    return model, opt


def test_nested_containers_round_trip(tmp_path):
    t = tinytorch.arange(6, dtype=tinytorch.float64).reshape(2, 3)
    obj = {
        "t": t, "same": t, "i": tinytorch.tensor([1, 2], dtype=tinytorch.int32), "b": tinytorch.tensor([True, False]),
        "h": tinytorch.ones(2, dtype=tinytorch.float16), "bf": tinytorch.ones(3, dtype=tinytorch.bfloat16) / 3,
        "scalar": tinytorch.tensor(2.5), "empty": tinytorch.zeros(0, 4),
        "od": OrderedDict([("z", 1), ("a", [1.5, None, True, "s"])]), "tuple": (1, (2, 3)), 4: "int key",
        "nan": float("nan"), "inf": -float("inf"), "big": 2 ** 70, "dtype": tinytorch.float16,
        "size": t.shape, "np": np.arange(3, dtype=np.int16), "npf": np.float32(0.1),
    }
    path = tmp_path / "obj.pt"
    tinytorch.save(obj, path)
    back = tinytorch.load(path)
    assert set(back) == set(obj)
    assert back["t"].dtype is tinytorch.float64 and back["t"].tolist() == t.tolist()
    assert back["same"] is back["t"]  # one tensor saved twice loads as one object
    assert back["i"].dtype is tinytorch.int32 and back["i"].tolist() == [1, 2]
    assert back["b"].dtype is tinytorch.bool and back["b"].tolist() == [True, False]
    assert back["h"].dtype is tinytorch.float16
    assert back["bf"].dtype is tinytorch.bfloat16 and back["bf"].tolist() == obj["bf"].tolist()
    assert back["scalar"].ndim == 0 and float(back["scalar"]) == 2.5
    assert back["empty"].shape == (0, 4)
    assert type(back["od"]) is OrderedDict and list(back["od"]) == ["z", "a"]
    assert back["od"]["a"] == [1.5, None, True, "s"]
    assert back["tuple"] == (1, (2, 3)) and back[4] == "int key"
    assert np.isnan(back["nan"]) and back["inf"] == -float("inf") and back["big"] == 2 ** 70
    assert back["dtype"] is tinytorch.float16 and back["size"] == t.shape and isinstance(back["size"], tinytorch.Size)
    assert back["np"].dtype == np.int16 and back["np"].tolist() == [0, 1, 2]
    assert back["npf"] == np.float32(0.1) and isinstance(back["npf"], np.float32)
    back["t"].add_(1)  # loaded arrays are writable
    assert back["t"].tolist()[0] == [1.0, 2.0, 3.0]


def test_model_and_optimizer_state_round_trip(tmp_path):
    model, opt = _checkpoint()
    path = os.fspath(tmp_path / "ckpt.pt")
    tinytorch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, path)
    ck = tinytorch.load(path)
    m2 = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    assert repr(m2.load_state_dict(ck["model"])) == "<All keys matched successfully>"
    for (k, a), (_, b) in zip(model.state_dict().items(), m2.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    o2 = optim.AdamW(m2.parameters(), lr=0.5)
    o2.load_state_dict(ck["opt"])
    assert o2.param_groups[0]["lr"] == 0.01 and o2.param_groups[0]["betas"] == (0.9, 0.999)
    st = o2.state[m2[0].weight]
    assert float(st["step"]) == 1.0 and st["step"].dtype is tinytorch.float32
    np.testing.assert_array_equal(st["exp_avg"].numpy(), opt.state[model[0].weight]["exp_avg"].numpy())
    # Both continue identically.
    for m, o in ((model, opt), (m2, o2)):
        x = tinytorch.ones(2, 3)
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    np.testing.assert_array_equal(model[2].weight.detach().numpy(), m2[2].weight.detach().numpy())


def test_tied_weights_are_stored_once_and_share_memory_after_load():
    emb = nn.Embedding(50, 16)
    head = nn.Linear(16, 50, bias=False)
    head.weight = emb.weight
    model = nn.ModuleDict({"emb": emb, "head": head})
    sd = model.state_dict()
    assert sd["emb.weight"] is not sd["head.weight"]  # two tensors, one array
    one, two = io.BytesIO(), io.BytesIO()
    tinytorch.save(sd, one)
    tinytorch.save({"emb.weight": sd["emb.weight"]}, two)
    assert len(one.getvalue()) - len(two.getvalue()) < 200  # the second name costs header bytes, not 3200 bytes
    one.seek(0)
    back = tinytorch.load(one)
    assert back["emb.weight"] is not back["head.weight"]
    assert np.shares_memory(back["emb.weight"].numpy(), back["head.weight"].numpy())


def test_parameters_and_requires_grad_round_trip():
    p = nn.Parameter(tinytorch.tensor([1.0, 2.0]))
    buf = io.BytesIO()
    tinytorch.save({"p": p, "g": tinytorch.ones(1, requires_grad=True), "kv": nn.Linear(1, 1).state_dict(
        keep_vars=True)}, buf)
    buf.seek(0)
    back = tinytorch.load(buf)
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad and back["p"].tolist() == [1.0, 2.0]
    assert type(back["g"]) is tinytorch.Tensor and back["g"].requires_grad
    assert isinstance(back["kv"]["weight"], nn.Parameter)
    # A non-leaf tensor saves its values.
    buf = io.BytesIO()
    tinytorch.save(p * 2, buf)
    buf.seek(0)
    assert tinytorch.load(buf).tolist() == [2.0, 4.0]


def test_map_location_forms(tmp_path):
    path = tmp_path / "m.pt"
    tinytorch.save({"w": tinytorch.ones(2)}, path)
    assert tinytorch.load(path, map_location="cpu")["w"].device == tinytorch.device("cpu")
    assert tinytorch.load(path, map_location=tinytorch.device("cpu"))["w"].is_cpu
    assert tinytorch.load(path, map_location={"cpu": "cpu"})["w"].is_cpu
    seen = []

    def relocate(t, location):
        seen.append(location)
        return t * 3
    assert tinytorch.load(path, map_location=relocate)["w"].tolist() == [3.0, 3.0] and seen == ["cpu"]
    if tinytorch.cuda.is_available():
        assert tinytorch.load(path, map_location="cuda")["w"].is_cuda
        assert tinytorch.load(path, map_location={"cpu": "cuda:0"})["w"].is_cuda
    else:
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device but "
                                               r"torch.cuda.is_available\(\) is False"):
            tinytorch.load(path, map_location="cuda")


def test_cuda_tensors_save_and_map_to_cpu(tmp_path):
    if not tinytorch.cuda.is_available():
        pytest.skip("needs a GPU")
    path = tmp_path / "g.pt"
    tinytorch.save({"w": tinytorch.ones(3, device="cuda")}, path)
    assert tinytorch.load(path)["w"].is_cuda
    assert tinytorch.load(path, map_location="cpu")["w"].is_cpu


def test_file_objects_and_paths_agree(tmp_path):
    obj = {"a": tinytorch.arange(4)}
    buf = io.BytesIO()
    tinytorch.save(obj, buf)
    path = tmp_path / "x.pt"
    tinytorch.save(obj, str(path))
    assert buf.getvalue() == path.read_bytes()
    assert buf.getvalue().startswith(MAGIC) and buf.getvalue().endswith(END_MAGIC)
    with open(path, "rb") as f:
        assert tinytorch.load(f)["a"].tolist() == [0, 1, 2, 3]
    with open(path, "wb") as f:
        tinytorch.save([1, 2], f)
    assert tinytorch.load(path) == [1, 2]
    # A checkpoint written after other bytes of a stream is read back from that position.
    buf = io.BytesIO()
    buf.write(b"preamble")
    tinytorch.save({"a": tinytorch.arange(3)}, buf)
    buf.seek(len(b"preamble"))
    assert tinytorch.load(buf)["a"].tolist() == [0, 1, 2]


class Unsaveable:
    def __reduce__(self):
        raise RuntimeError("cannot pickle this")


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "ck.pt"
    tinytorch.save({"v": tinytorch.tensor([1.0])}, path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="cannot pickle this"):
        tinytorch.save({"v": tinytorch.tensor([2.0]), "bad": Unsaveable()}, path)
    assert path.read_bytes() == before
    assert tinytorch.load(path)["v"].tolist() == [1.0]
    assert sorted(os.listdir(tmp_path)) == ["ck.pt"]  # the temporary file was removed


def test_weights_only_refuses_pickled_objects(tmp_path):
    path = tmp_path / "p.pt"
    tinytorch.save({"w": tinytorch.ones(1), "cfg": {1, 2}}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"Weights only load failed .* builtins.set"):
        tinytorch.load(path)
    back = tinytorch.load(path, weights_only=False)
    assert back["cfg"] == {1, 2} and back["w"].tolist() == [1.0]


def _saved_bytes():
    buf = io.BytesIO()
    tinytorch.save({"w": tinytorch.arange(1000, dtype=tinytorch.float32), "n": 5}, buf)
    return bytearray(buf.getvalue())


def test_truncated_file_error_names_file(tmp_path):
    data = _saved_bytes()
    path = tmp_path / "trunc.pt"
    path.write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(RuntimeError, match=r"trunc\.pt: file is truncated or corrupted: end marker missing"):
        tinytorch.load(path)
    path.write_bytes(bytes(data[:5]))
    with pytest.raises(RuntimeError, match=r"trunc\.pt: .*truncated"):
        tinytorch.load(path)
    path.write_bytes(b"")
    with pytest.raises(RuntimeError, match="truncated"):
        tinytorch.load(path)
    # Bytes cut from the middle: the footer survives but the lengths no longer add up.
    path.write_bytes(bytes(data[:100] + data[200:]))
    with pytest.raises(RuntimeError, match=r"trunc\.pt: length mismatch"):
        tinytorch.load(path)


def test_corrupted_data_and_header_are_detected(tmp_path):
    data = _saved_bytes()
    path = tmp_path / "bad.pt"
    flipped = bytearray(data)
    flipped[64 + 40] ^= 0xFF  # inside the tensor's bytes (data blocks start 64-byte aligned)
    path.write_bytes(bytes(flipped))
    with pytest.raises(RuntimeError, match=r"bad\.pt: tensor 0 \(dtype float32, shape \[1000\]\): checksum mismatch"):
        tinytorch.load(path)
    flipped = bytearray(data)
    flipped[-40] ^= 0x01  # inside the JSON header
    path.write_bytes(bytes(flipped))
    with pytest.raises(RuntimeError, match=r"bad\.pt: header checksum mismatch"):
        tinytorch.load(path)
    path.write_bytes(b"NOTACKPT" + bytes(100))
    with pytest.raises(RuntimeError, match="not a tinytorch checkpoint"):
        tinytorch.load(path)
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(RuntimeError, match="zip archive"):
        tinytorch.load(path)


def test_checkpoint_weights_agree_with_torch(tmp_path):
    torch = pytest.importorskip("torch")
    # A PyTorch-style checkpoint script run with tinytorch: save a model, optimizer and scheduler.
    model, opt = _checkpoint()
    sched = optim.lr_scheduler.StepLR(opt, step_size=2)
    tinytorch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "sched": sched.state_dict()},
                   tmp_path / "c.pt")
    ck = tinytorch.load(tmp_path / "c.pt", map_location="cpu", weights_only=True)
    assert ck["sched"]["step_size"] == 2 and ck["sched"]["base_lrs"] == [0.01]
    # And the weights equal what PyTorch computes from them.
    tm = torch.nn.Linear(3, 4)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in
                        (("weight", ck["model"]["0.weight"]), ("bias", ck["model"]["0.bias"]))})
    x = np.ones((1, 3), np.float32)
    np.testing.assert_allclose(tm(torch.tensor(x)).detach().numpy(), model[0](tinytorch.tensor(x)).detach().numpy(),
                               rtol=1e-6)
