"""tinytorch.save / load: PyTorch's zip format both ways, round trips, map_location, mmap, atomic writes,
weights_only, corruption errors, and tinytorch's older format."""
import io
import mmap
import os
import pickle
import re
import struct
import zipfile
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import pytest

import tinytorch
import tinytorch.nn as nn
import tinytorch.optim as optim
from tinytorch import serialization

DATA = Path(__file__).parent / "data"


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
        "size": t.shape, "set": {1, 2}, "bytes": b"\x00\xffab", "device": tinytorch.device("cpu"),
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
    assert back["set"] == {1, 2} and back["bytes"] == b"\x00\xffab" and back["device"] == tinytorch.device("cpu")
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

    def relocate(storage, location):  # PyTorch's idiom: called with each storage and where it was saved
        seen.append((type(storage).__name__, storage.dtype, len(storage), location))
        return storage.cpu()
    assert tinytorch.load(path, map_location=relocate)["w"].tolist() == [1.0, 1.0]
    assert seen == [("TypedStorage", tinytorch.float32, 2, "cpu")]
    assert tinytorch.load(path, map_location=lambda storage, loc: None)["w"].is_cpu  # None: where it was saved
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
    assert buf.getvalue().startswith(b"PK\x03\x04")
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
    # With no earlier checkpoint, a save that fails midway leaves no file at all.
    with pytest.raises(RuntimeError, match="cannot pickle this"):
        tinytorch.save({"v": tinytorch.ones(100), "bad": Unsaveable()}, tmp_path / "new.pt")
    assert sorted(os.listdir(tmp_path)) == ["ck.pt"]
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o666 & ~_umask())  # the mode open() would give


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


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


# ------------------------------------------------------------------ the zip archive itself

def test_archive_layout_matches_pytorch(tmp_path):
    base = tinytorch.arange(12, dtype=tinytorch.float32).reshape(3, 4)
    path = tmp_path / "c.pt"
    tinytorch.save({"a": base, "col": base[:, 1], "h": tinytorch.ones(3, dtype=tinytorch.float16)}, path)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None  # every record's CRC-32 is right
        names = zf.namelist()
        assert names == ["archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                         "archive/byteorder", "archive/data/0", "archive/data/1", "archive/version",
                         "archive/.data/serialization_id"]  # the view shares data/0 with its base
        assert zf.read("archive/version") == b"3\n" and zf.read("archive/byteorder") == b"little"
        assert zf.read("archive/.storage_alignment") == b"64"
        assert len(zf.read("archive/.data/serialization_id")) == 40
        raw = path.read_bytes()
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            start = info.header_offset + 30 + name_len + extra_len
            assert start % 64 == 0, info.filename  # aligned, so storages can be memory-mapped
        data0 = zf.read("archive/data/0")
    assert np.frombuffer(data0, np.float32).tolist() == list(range(12))


def test_views_keep_sharing_strides_and_offsets():
    base = tinytorch.arange(24, dtype=tinytorch.float64).reshape(4, 6)
    obj = {"base": base, "t": base.t(), "col": base[:, 2], "step": base[::2, 1::3], "row": base[3]}
    buf = io.BytesIO()
    tinytorch.save(obj, buf)
    buf.seek(0)
    back = tinytorch.load(buf)
    for k, v in obj.items():
        assert back[k].tolist() == v.tolist(), k
        assert back[k].stride() == v.stride(), k
        assert np.shares_memory(back[k].numpy(), back["base"].numpy()), k
    # Saved again, what was loaded keeps its sharing (each loaded tensor views its storage's array).
    buf = io.BytesIO()
    tinytorch.save(back, buf)
    assert len(zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()) == 7  # one storage record
    buf.seek(0)
    back = tinytorch.load(buf)
    assert back["step"].tolist() == obj["step"].tolist() and back["t"].stride() == (1, 6)
    back["base"].zero_()
    assert back["t"].sum().item() == 0 and back["step"].sum().item() == 0
    # A tensor made by as_strided (NumPy puts a stand-in object between it and its base) is found in its base.
    strided = np.lib.stride_tricks.as_strided(base.numpy(), shape=(3, 2), strides=(16, 8))
    buf = io.BytesIO()
    tinytorch.save({"base": base, "s": tinytorch.from_numpy(strided)}, buf)
    assert len(zipfile.ZipFile(io.BytesIO(buf.getvalue())).namelist()) == 7


def test_zip64_records_when_sizes_pass_the_limit(tmp_path, monkeypatch):
    # The 4 GiB limit lowered so that sizes and offsets take the zip64 fields with a small file.
    monkeypatch.setattr(serialization, "_ZIP64_LIMIT", 100)
    w = tinytorch.arange(300, dtype=tinytorch.float32)
    path = tmp_path / "z.pt"
    tinytorch.save({"w": w, "b": tinytorch.ones(40)}, path)
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None
        assert zf.getinfo("archive/data/0").file_size == 1200
    back = tinytorch.load(path)
    assert back["w"].tolist() == w.tolist() and back["b"].tolist() == [1.0] * 40
    torch = pytest.importorskip("torch")
    assert torch.load(path, weights_only=True)["w"].tolist() == w.tolist()


# ------------------------------------------------------------------ PyTorch interoperability

def _rich_state():
    model, opt = _checkpoint()
    base = tinytorch.arange(20, dtype=tinytorch.float32).reshape(4, 5)
    return model, opt, {
        "model": model.state_dict(), "optimizer": opt.state_dict(),
        "base": base, "view": base[1:, 2], "t": base.t(), "strided": base[::2, ::2],
        "bf16": (tinytorch.arange(6, dtype=tinytorch.float32) / 7).to(tinytorch.bfloat16),
        "f16": tinytorch.tensor([0.5, -2.0], dtype=tinytorch.float16),
        "f64": tinytorch.tensor([1e-300, 3.0], dtype=tinytorch.float64),
        "i64": tinytorch.tensor([2 ** 40, -1]), "i32": tinytorch.tensor([7], dtype=tinytorch.int32),
        "i16": tinytorch.tensor([-3], dtype=tinytorch.int16), "i8": tinytorch.tensor([-4], dtype=tinytorch.int8),
        "u8": tinytorch.tensor([255], dtype=tinytorch.uint8), "bool": tinytorch.tensor([True, False]),
        "scalar": tinytorch.tensor(1.25), "empty": tinytorch.zeros(0, 3),
        "param": nn.Parameter(tinytorch.tensor([1.0, 2.0])), "frozen": nn.Parameter(tinytorch.ones(1), False),
        "dtype": tinytorch.bfloat16, "device": tinytorch.device("cpu"), "size": tinytorch.Size([2, 3]),
        "od": OrderedDict([("b", 1), ("a", 2.5)]), "nested": [(1, "x"), {"k": None}], "bytes": b"\x01\x02",
    }


def test_tinytorch_checkpoint_loads_in_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    model, opt, obj = _rich_state()
    path = tmp_path / "tt.pt"
    tinytorch.save(obj, path)
    for mmap in (False, True):  # PyTorch's mmap=True maps our 64-byte-aligned records
        ck = torch.load(path, weights_only=True, mmap=mmap)
        for k in ("base", "view", "t", "strided", "f16", "f64", "i64", "i32", "i16", "i8", "u8", "bool", "scalar",
                  "empty"):
            assert str(ck[k].dtype) == "torch." + obj[k].dtype.name, k
            assert ck[k].shape == tuple(obj[k].shape) and ck[k].stride() == obj[k].stride(), k
            np.testing.assert_array_equal(ck[k].numpy(), obj[k].numpy(), err_msg=k)
        assert ck["bf16"].dtype == torch.bfloat16
        assert ck["bf16"].float().tolist() == obj["bf16"].float().tolist()
        ptr = ck["base"].untyped_storage().data_ptr()
        for k in ("view", "t", "strided"):  # views still view one storage
            assert ck[k].untyped_storage().data_ptr() == ptr, k
        assert ck["view"].storage_offset() == 7
        assert isinstance(ck["param"], torch.nn.Parameter) and ck["param"].requires_grad
        assert isinstance(ck["frozen"], torch.nn.Parameter) and not ck["frozen"].requires_grad
        assert ck["dtype"] is torch.bfloat16 and ck["device"] == torch.device("cpu")
        assert type(ck["size"]) is torch.Size and ck["size"] == (2, 3)
        assert type(ck["od"]) is OrderedDict and list(ck["od"].items()) == [("b", 1), ("a", 2.5)]
        assert ck["nested"] == [(1, "x"), {"k": None}] and ck["bytes"] == b"\x01\x02"
        assert type(ck["model"]) is OrderedDict
    # The weights drive PyTorch's modules and the optimizer state resumes PyTorch's AdamW identically.
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    tm.load_state_dict(ck["model"])
    topt = torch.optim.AdamW(tm.parameters(), lr=0.5)
    topt.load_state_dict(ck["optimizer"])
    assert topt.param_groups[0]["lr"] == 0.01 and float(topt.state[tm[0].weight]["step"]) == 1.0
    x = np.ones((2, 3), np.float32)
    for m, o, lib in ((tm, topt, torch), (model, opt, tinytorch)):
        o.zero_grad()
        m(lib.tensor(x)).sum().backward()
        o.step()
    np.testing.assert_allclose(tm[2].weight.detach().numpy(), model[2].weight.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_pytorch_checkpoint_loads_in_tinytorch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2))
    topt = torch.optim.AdamW(tm.parameters(), lr=0.01)
    tm(torch.randn(5, 3)).sum().backward()
    topt.step()
    base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    obj = {"model": tm.state_dict(), "optimizer": topt.state_dict(), "base": base, "view": base[1:, 2],
           "t": base.t(), "strided": base[::2, ::2], "bf16": (torch.arange(6) / 7).to(torch.bfloat16),
           "f16": torch.tensor([0.5, -2.0], dtype=torch.float16), "i64": torch.tensor([2 ** 40, -1]),
           "i8": torch.tensor([-4], dtype=torch.int8), "bool": torch.tensor([True, False]),
           "param": torch.nn.Parameter(torch.ones(2)), "dtype": torch.float16, "device": torch.device("cpu"),
           "size": torch.Size([2, 3]), "bytes": b"ab", "set": {3}, "scalar": torch.tensor(2.0)}
    path = tmp_path / "model.pt"  # PyTorch names the archive after the file: model/data.pkl
    torch.save(obj, path)
    for mmap in (False, True):
        ck = tinytorch.load(path, mmap=mmap)
        for k in ("base", "view", "t", "strided", "f16", "i64", "i8", "bool", "scalar"):
            assert ck[k].dtype.name == str(obj[k].dtype)[len("torch."):], k
            assert ck[k].stride() == obj[k].stride(), k
            np.testing.assert_array_equal(ck[k].numpy(), obj[k].numpy(), err_msg=k)
            if k in ("view", "t", "strided"):
                assert np.shares_memory(ck[k].numpy(), ck["base"].numpy()), k
        assert ck["bf16"].dtype is tinytorch.bfloat16 and ck["bf16"].float().tolist() == obj["bf16"].float().tolist()
        assert isinstance(ck["param"], nn.Parameter) and ck["param"].requires_grad
        assert ck["dtype"] is tinytorch.float16 and ck["device"] == tinytorch.device("cpu")
        assert isinstance(ck["size"], tinytorch.Size) and ck["size"] == (2, 3)
        assert ck["bytes"] == b"ab" and ck["set"] == {3} and type(ck["model"]) is OrderedDict
    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2))
    model.load_state_dict(ck["model"])
    opt = optim.AdamW(model.parameters(), lr=0.5)
    opt.load_state_dict(ck["optimizer"])
    assert float(opt.state[model[0].weight]["step"]) == 1.0
    x = np.ones((2, 3), np.float32)
    for m, o, lib in ((tm, topt, torch), (model, opt, tinytorch)):
        o.zero_grad()
        m(lib.tensor(x)).sum().backward()
        o.step()
    np.testing.assert_allclose(model[2].weight.detach().numpy(), tm[2].weight.detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_pytorch_dtypes_tinytorch_lacks_give_a_clear_error(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "old.pt"  # PyTorch's pre-1.6 format reads (test_pytorch_pre_1_6_checkpoint_loads)
    torch.save({"x": torch.ones(2)}, path, _use_new_zipfile_serialization=False)
    assert tinytorch.load(path)["x"].tolist() == [1.0, 1.0]
    path = tmp_path / "f8.pt"
    torch.save({"x": torch.zeros(2, dtype=torch.float8_e4m3fn)}, path)
    with pytest.raises(pickle.UnpicklingError, match="dtype torch.float8_e4m3fn, which tinytorch does not have"):
        tinytorch.load(path)


def test_unsigned_shell_dtypes_round_trip_with_pytorch(tmp_path):
    """uint16/32/64 tensors (no legacy storage class) are written as PyTorch writes them: an untyped storage and
    _rebuild_tensor_v3 with the dtype; both libraries read both files."""
    x = tinytorch.from_numpy(np.array([[1, 65535], [3, 4]], np.uint16))
    obj = {"x": x, "xt": x.t(), "y": tinytorch.from_numpy(np.array([2 ** 40], np.uint64)), "f": tinytorch.ones(2)}
    path = tmp_path / "u.pt"
    tinytorch.save(obj, path)
    back = tinytorch.load(path)
    assert back["x"].dtype is tinytorch.uint16 and back["x"].tolist() == [[1, 65535], [3, 4]]
    assert back["xt"].tolist() == [[1, 3], [65535, 4]] and back["y"].tolist() == [2 ** 40]
    torch = pytest.importorskip("torch")
    ck = torch.load(path, weights_only=True)
    assert ck["x"].dtype == torch.uint16 and ck["xt"].tolist() == [[1, 3], [65535, 4]]
    assert ck["y"].dtype == torch.uint64 and ck["y"].tolist() == [2 ** 40]
    torch.save({"z": torch.tensor([7, 8], dtype=torch.uint32)}, tmp_path / "t.pt")
    z = tinytorch.load(tmp_path / "t.pt")["z"]
    assert z.dtype is tinytorch.uint32 and z.tolist() == [7, 8]


# ------------------------------------------------------------------ weights_only

class Point:
    def __init__(self, x):
        self.x = x


class RunsCode:
    """Unpickling this runs a shell command: what a hostile checkpoint would hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_weights_only_refuses_code_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    tinytorch.save({"w": tinytorch.ones(1), "x": RunsCode(marker)}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"(?s)Weights only load failed for .*evil\.pt.*"
                                                     r"Unsupported global: GLOBAL posix\.system"):
        tinytorch.load(path)
    assert not marker.exists()  # refused before the call
    assert serialization.get_unsafe_globals_in_checkpoint(path) == ["posix.system"]
    torch = pytest.importorskip("torch")
    with pytest.raises(pickle.UnpicklingError):  # PyTorch refuses the same file
        torch.load(path, weights_only=True)
    assert not marker.exists()


def test_weights_only_false_runs_the_full_pickle(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "evil.pt"
    tinytorch.save({"x": RunsCode(marker)}, path)
    assert tinytorch.load(path, weights_only=False)["x"] == 0  # the payload is real: trusted loads run it
    assert marker.exists()


def test_safe_globals_admit_user_classes(tmp_path):
    path = tmp_path / "p.pt"
    tinytorch.save({"w": tinytorch.ones(1), "pt": Point(3)}, path)
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL test_serialization\.Point was not an allowed "
                                                     r"global by default.*add_safe_globals\(\[test_serialization"):
        tinytorch.load(path)
    with serialization.safe_globals([Point]):
        assert Point in serialization.get_safe_globals()
        assert tinytorch.load(path)["pt"].x == 3
    assert Point not in serialization.get_safe_globals()
    serialization.add_safe_globals([Point])
    try:
        assert tinytorch.load(path)["pt"].x == 3
    finally:
        serialization.clear_safe_globals()
    assert tinytorch.load(path, weights_only=False)["pt"].x == 3
    with pytest.raises(RuntimeError, match="Can not safely load weights when explicit pickle_module"):
        tinytorch.load(path, pickle_module=pickle, weights_only=True)
    assert tinytorch.load(path, pickle_module=pickle)["pt"].x == 3  # pickle_module alone implies weights_only=False


def _archive(path, obj_pickle: bytes, records: dict):
    with open(path, "wb") as f:
        w = serialization._ZipWriter(f)
        w.write_record("data.pkl", obj_pickle)
        for name, data in records.items():
            w.write_record(name, data)
        w.finish()


class OutOfBounds:
    """Pickles as a tensor whose size reaches past its 4-element storage."""

    def __reduce__(self):
        pid = ("storage", serialization._TorchGlobal("torch", "FloatStorage"), "0", "cpu", 4)
        return (serialization._TorchGlobal("torch._utils", "_rebuild_tensor_v2"),
                (serialization._StorageRef(pid), 0, (1 << 20,), (1,), False, OrderedDict()))


def test_tensor_geometry_outside_its_storage_is_refused(tmp_path):
    buf = io.BytesIO()
    serialization._Pickler(buf, 2).dump({"x": OutOfBounds()})
    path = tmp_path / "oob.pt"
    _archive(path, buf.getvalue(), {"data/0": np.zeros(4, np.float32).tobytes()})
    with pytest.raises(pickle.UnpicklingError, match="out of bounds for storage of size 16"):
        tinytorch.load(path)
    with pytest.raises(pickle.UnpicklingError, match="out of bounds"):
        tinytorch.load(path, weights_only=False)


def test_numpy_objects_need_weights_only_false():
    buf = io.BytesIO()
    tinytorch.save({"np": np.arange(3, dtype=np.int16), "npf": np.float32(0.1)}, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="Unsupported global"):
        tinytorch.load(buf)
    buf.seek(0)
    back = tinytorch.load(buf, weights_only=False)
    assert back["np"].dtype == np.int16 and back["np"].tolist() == [0, 1, 2]
    assert back["npf"] == np.float32(0.1)


# ------------------------------------------------------------------ truncation and corruption

def _saved_bytes():
    buf = io.BytesIO()
    tinytorch.save({"w": tinytorch.arange(1000, dtype=tinytorch.float32), "n": 5}, buf)
    return bytearray(buf.getvalue())


def test_truncated_file_error_names_file(tmp_path):
    data = _saved_bytes()
    path = tmp_path / "trunc.pt"
    for cut in (len(data) // 2, len(data) - 10, 40):
        path.write_bytes(bytes(data[:cut]))
        with pytest.raises(serialization.CheckpointError, match=r"trunc\.pt: file is truncated or corrupted"):
            tinytorch.load(path)
    path.write_bytes(bytes(data[:3]))
    with pytest.raises(RuntimeError, match=r"trunc\.pt: file is truncated"):
        tinytorch.load(path)
    path.write_bytes(b"")
    with pytest.raises(RuntimeError, match=r"trunc\.pt: file is truncated"):
        tinytorch.load(path)
    # Bytes cut from the middle of a storage: the directory at the end no longer matches the records.
    path.write_bytes(bytes(data[:1000] + data[2000:]))
    with pytest.raises(serialization.CheckpointError, match=r"trunc\.pt: "):
        tinytorch.load(path)


def test_corrupted_records_are_detected(tmp_path):
    data = _saved_bytes()
    path = tmp_path / "bad.pt"
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        w_info = zf.getinfo("archive/data/0")
        pkl_info = zf.getinfo("archive/data.pkl")
    name_len, extra_len = struct.unpack("<HH", data[w_info.header_offset + 26:w_info.header_offset + 30])
    flipped = bytearray(data)
    flipped[w_info.header_offset + 30 + name_len + extra_len + 40] ^= 0xFF  # inside the tensor's bytes
    path.write_bytes(bytes(flipped))
    with pytest.raises(serialization.CheckpointError,
                       match=r"bad\.pt: record 'archive/data/0': CRC-32 mismatch .* the file is corrupted"):
        tinytorch.load(path)
    flipped = bytearray(data)
    flipped[pkl_info.header_offset + 64 + 20] ^= 0x01  # inside the pickle
    path.write_bytes(bytes(flipped))
    with pytest.raises(serialization.CheckpointError, match=r"bad\.pt: record 'archive/data.pkl': Bad CRC-32"):
        tinytorch.load(path)
    path.write_bytes(b"NOTACKPT" + bytes(100))
    with pytest.raises(RuntimeError, match=r"bad\.pt: not a checkpoint tinytorch can read"):
        tinytorch.load(path)
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(RuntimeError, match=r"bad\.pt: file is truncated or corrupted: not a readable zip"):
        tinytorch.load(path)


def test_every_flipped_byte_of_a_saved_file_is_reported(tmp_path):
    # Headers, directory, padding and comment included: the archive comment's CRC-32C covers what the
    # records' CRC-32s do not.
    buf = io.BytesIO()
    tinytorch.save({"w": tinytorch.arange(6, dtype=tinytorch.float32), "n": 5}, buf)
    good = buf.getvalue()
    assert re.fullmatch(rb"tinytorch crc32c=[0-9a-f]{8}", good[-25:])
    path = tmp_path / "flip.pt"
    for pos in range(len(good)):
        for mask in (0x01, 0x80):
            bad = bytearray(good)
            bad[pos] ^= mask
            path.write_bytes(bytes(bad))
            with pytest.raises(serialization.CheckpointError, match=r"flip\.pt: "):
                tinytorch.load(path)
    with_headers = bytearray(good)
    with_headers[good.rfind(b"PK\x01\x02") + 12] ^= 0x01  # the directory's time field: no record's data
    path.write_bytes(bytes(with_headers))
    with pytest.raises(serialization.CheckpointError, match="zip headers or the directory are corrupted"):
        tinytorch.load(path)


# ------------------------------------------------------------------ mmap

def test_mmap_load_maps_storages_copy_on_write(tmp_path):
    base = tinytorch.arange(4096, dtype=tinytorch.float32).reshape(64, 64)
    path = tmp_path / "m.pt"
    tinytorch.save({"base": base, "t": base.t(), "bf": base.to(tinytorch.bfloat16)[0]}, path)
    before = path.read_bytes()
    back = tinytorch.load(path, mmap=True)
    arr = back["base"].numpy()
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    assert isinstance(getattr(arr.base, "obj", arr.base), mmap.mmap)  # the tensor views a mapping of the file
    assert back["t"].tolist() == base.t().tolist() and back["bf"].float().tolist() == list(range(64))
    assert np.shares_memory(back["t"].numpy(), back["base"].numpy())
    back["base"].add_(1)  # writable; the file does not change (copy-on-write, like PyTorch's mmap)
    assert back["t"][1, 0].item() == 2.0 and path.read_bytes() == before
    # Saving what a mapped load returned writes the storages, not the mapped file.
    out = io.BytesIO()
    tinytorch.save({"t": back["t"]}, out)
    out.seek(0)
    assert tinytorch.load(out)["t"].tolist() == back["t"].tolist()
    with pytest.raises(ValueError, match="f must be a file path in order to use the mmap argument"):
        tinytorch.load(io.BytesIO(before), mmap=True)
    path.write_bytes(before[:len(before) // 2])
    with pytest.raises(serialization.CheckpointError, match=r"m\.pt: file is truncated"):
        tinytorch.load(path, mmap=True)


# ------------------------------------------------------------------ tinytorch's older format

def test_older_tinytorch_format_still_loads():
    ck = tinytorch.load(DATA / "tinytorch_v1_checkpoint.pt")
    assert ck["t"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]] and ck["same"] is ck["t"]
    assert ck["i"].dtype is tinytorch.int32 and ck["bf"].dtype is tinytorch.bfloat16
    assert isinstance(ck["p"], nn.Parameter) and ck["p"].tolist() == [1.0, 2.0]
    assert type(ck["od"]) is OrderedDict and ck["tuple"] == (1, (2, 3)) and ck[4] == "int key"
    assert ck["dtype"] is tinytorch.float16 and ck["size"] == (2, 3) and ck["w"].tolist() == list(range(1000))
    assert tinytorch.load(DATA / "tinytorch_v1_checkpoint.pt", map_location=lambda s, loc: s)["t"].shape == (2, 3)
    with pytest.raises(pickle.UnpicklingError, match=r"Weights only load failed .* builtins.set"):
        tinytorch.load(DATA / "tinytorch_v1_pickled_set.pt")
    assert tinytorch.load(DATA / "tinytorch_v1_pickled_set.pt", weights_only=False)["cfg"] == {1, 2}
    with pytest.raises(RuntimeError, match="mmap can only be used with files saved in PyTorch's zip format"):
        tinytorch.load(DATA / "tinytorch_v1_checkpoint.pt", mmap=True)


def test_older_tinytorch_format_corruption_is_detected(tmp_path):
    data = bytearray((DATA / "tinytorch_v1_checkpoint.pt").read_bytes())
    data[-40] ^= 0x01  # inside the JSON header
    path = tmp_path / "old.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match=r"old\.pt: header checksum mismatch"):
        tinytorch.load(path)


def test_save_keyword_arguments_of_pytorch():
    buf = io.BytesIO()
    tinytorch.save({"a": tinytorch.ones(2)}, buf, pickle_protocol=4, _use_new_zipfile_serialization=False,
                   _disable_byteorder_record=True)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        assert "archive/byteorder" not in zf.namelist()
    buf.seek(0)
    assert tinytorch.load(buf)["a"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="pickles with Python's pickle module"):
        tinytorch.save({}, io.BytesIO(), pickle_module=io)


def test_big_endian_archives_are_byte_swapped(tmp_path):
    t = tinytorch.tensor([1.5, -2.0, 3.25])
    buf = io.BytesIO()
    pickler = serialization._Pickler(buf, 2)
    pickler.dump({"t": t})
    flat = pickler.storages["0"][0]
    path = tmp_path / "be.pt"
    _archive(path, buf.getvalue(), {"byteorder": b"big", "data/0": flat.astype(">f4").tobytes()})
    assert tinytorch.load(path)["t"].tolist() == [1.5, -2.0, 3.25]


def test_object_state_cannot_set_dunder_attributes(tmp_path):
    class Evil:
        def __reduce__(self):  # an OrderedDict whose pickled state would reassign its class
            return OrderedDict, (), {"__class__": Counter}
    buf = io.BytesIO()
    serialization._Pickler(buf, 2).dump(Evil())
    path = tmp_path / "state.pt"
    _archive(path, buf.getvalue(), {})
    with pytest.raises(pickle.UnpicklingError, match="object state must be a dict of attribute names"):
        tinytorch.load(path)


def test_pytorch_pre_1_6_checkpoint_loads(tmp_path):
    # tests/data/pytorch_legacy_checkpoint.pt: torch.save(..., _use_new_zipfile_serialization=False) from PyTorch
    # 2.13 (the format every checkpoint had before 1.6): views sharing one storage, transposes, several dtypes
    path = DATA / "pytorch_legacy_checkpoint.pt"
    for weights_only in (True, False):
        ck = tinytorch.load(path, weights_only=weights_only)
        w = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
        assert np.array_equal(ck["weight"].numpy(), w) and np.array_equal(ck["t"].numpy(), w.T)
        assert ck["col"].tolist() == pytest.approx(w[:, 1].tolist())
        assert ck["shared"].dtype is tinytorch.float64 and ck["slice"].tolist() == [2.0, 3.0, 4.0]
        assert ck["slice"].untyped_storage().data_ptr() == ck["shared"].untyped_storage().data_ptr()
        assert ck["i64"].tolist() == [1, -2, 3] and ck["half"].dtype is tinytorch.float16
        assert ck["half"].tolist() == [0.5, -1.5] and ck["flag"].tolist() == [True, False]
        assert ck["epoch"] == 7 and ck["name"] == "pre-1.6" and ck["empty"].shape == (0, 3)
        assert ck["nested"][0].tolist() == [[1.0, 1.0], [1.0, 1.0]] and ck["nested"][1][0].tolist() == [0.0]
    with open(path, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[:-20])
    with pytest.raises(serialization.CheckpointError, match="truncated"):
        tinytorch.load(cut)
    plain = io.BytesIO()
    pickle.dump({"a": 1}, plain)
    plain.seek(0)
    with pytest.raises(serialization.CheckpointError, match="plain pickle"):
        tinytorch.load(plain)
