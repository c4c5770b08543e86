"""Distributed checkpoints refuse what they did not write: CRC-32C per piece and for the metadata, file sizes,
errors naming the file, the item and the rank, on every rank at once; a failed load changes nothing."""
import json
import os
import sys

import numpy as np
import pytest

import tinytorch
import tinytorch.distributed.checkpoint as dcp
from tinytorch import _C
from tinytorch.distributed.checkpoint import _dcp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_helpers import run_ranks  # noqa: E402


def _bitwise_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def test_crc32c_matches_the_standard_on_both_paths():
    assert _C._cpu.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert _C._cpu.crc32c(b"") == 0
    data = np.random.default_rng(0).integers(0, 256, 600, dtype=np.uint8).tobytes()
    for start in range(0, 9):
        for n in (0, 1, 7, 8, 9, 63, 64, 65, 300):
            chunk = data[start:start + n]
            want = _bitwise_crc32c(chunk)
            assert _C._cpu.crc32c(chunk) == want
            assert _C._cpu.crc32c(memoryview(data)[start:start + n], portable=True) == want
    # Continuing from a previous value is the CRC of the concatenation (as zlib.crc32's second argument).
    assert _C._cpu.crc32c(data[100:], _C._cpu.crc32c(data[:100])) == _C._cpu.crc32c(data)
    assert _C._cpu.crc32c(np.arange(10, dtype=np.float64)) == _C._cpu.crc32c(np.arange(10, dtype=np.float64).tobytes())
    with pytest.raises(ValueError, match="not C-contiguous"):
        _C._cpu.crc32c(np.arange(10)[::2])


def _state():
    return {"model": {"w": tinytorch.arange(24, dtype=tinytorch.float32).reshape(4, 6),
                      "b": tinytorch.tensor([0.5, -1.5], dtype=tinytorch.float64)},
            "step": 7, "name": "run"}


def _blank():
    return {"model": {"w": tinytorch.zeros(4, 6), "b": tinytorch.zeros(2, dtype=tinytorch.float64)},
            "step": -1, "name": ""}


def test_every_flipped_byte_of_every_file_is_reported(tmp_path):
    path = str(tmp_path / "ck")
    meta = dcp.save(_state(), checkpoint_id=path, no_dist=True)
    assert all("crc32c" in p and p["rank"] == 0 for p in meta["pieces"])
    assert meta["files"] == {"__0_0.distcp": {"rank": 0, "nbytes": 24 * 4 + 2 * 8}}
    back = _blank()
    dcp.load(back, checkpoint_id=path, no_dist=True)
    assert back["step"] == 7 and back["name"] == "run"
    np.testing.assert_array_equal(back["model"]["w"].numpy(), np.arange(24, dtype=np.float32).reshape(4, 6))
    for fname in ("__0_0.distcp", ".metadata"):
        fpath = os.path.join(path, fname)
        good = open(fpath, "rb").read()
        for pos in range(len(good)):
            for flip in (0x01, 0x80):
                bad = bytearray(good)
                bad[pos] ^= flip
                with open(fpath, "wb") as f:
                    f.write(bad)
                target = _blank()
                with pytest.raises(dcp.CheckpointException, match=f"{path}/{fname}") as e:
                    dcp.load(target, checkpoint_id=path, no_dist=True)
                # Nothing was taken: the state dict given is untouched.
                assert target["step"] == -1 and not target["model"]["w"].numpy().any()
                if fname == "__0_0.distcp":
                    item = "model.w" if pos < 96 else "model.b"
                    assert f"(written by rank 0) is corrupt: item {item}" in str(e.value)
        with open(fpath, "wb") as f:
            f.write(good)


def test_truncated_and_missing_files_name_the_file(tmp_path):
    path = str(tmp_path / "ck")
    dcp.save(_state(), checkpoint_id=path, no_dist=True)
    data = os.path.join(path, "__0_0.distcp")
    good = open(data, "rb").read()
    for cut in (0, 50, len(good) - 1):
        with open(data, "wb") as f:
            f.write(good[:cut])
        with pytest.raises(dcp.CheckpointException,
                           match=rf"{data} \(written by rank 0\) has {cut} bytes, the metadata says 112: the file "
                                 "is truncated"):
            dcp.load(_blank(), checkpoint_id=path, no_dist=True)
    with open(data, "wb") as f:
        f.write(good + b"\0")
    with pytest.raises(dcp.CheckpointException, match="has 113 bytes, the metadata says 112: the file is corrupt"):
        dcp.load(_blank(), checkpoint_id=path, no_dist=True)
    os.unlink(data)
    with pytest.raises(dcp.CheckpointException, match=f"{data} is missing"):
        dcp.load(_blank(), checkpoint_id=path, no_dist=True)
    mpath = os.path.join(path, ".metadata")
    with open(mpath, "r+b") as f:
        f.truncate(60)
    with pytest.raises(dcp.CheckpointException, match=f"{mpath} \\(written by rank 0\\) is corrupt: CRC-32C"):
        dcp.load(_blank(), checkpoint_id=path, no_dist=True)
    os.unlink(mpath)
    with pytest.raises(dcp.CheckpointException, match="does not exist: .* is not a complete distributed checkpoint"):
        dcp.load(_blank(), checkpoint_id=path, no_dist=True)


def test_format_1_checkpoints_without_checksums_still_load(tmp_path):
    path = str(tmp_path / "ck")
    meta = dcp.save(_state(), checkpoint_id=path, no_dist=True)
    meta["format"] = "tinytorch-dcp-1"
    del meta["files"]
    for p in meta["pieces"]:
        del p["crc32c"], p["rank"]
    with open(os.path.join(path, ".metadata"), "w") as f:
        json.dump(meta, f)
    back = _blank()
    dcp.load(back, checkpoint_id=path, no_dist=True)
    np.testing.assert_array_equal(back["model"]["b"].numpy(), [0.5, -1.5])
    _dcp._verify(path)


def _sharded_worker(rank, world, port, path, phase):
    import tinytorch.distributed as dist
    from tinytorch.distributed.tensor import Shard, distribute_tensor
    dist.init_process_group("ring", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=30)
    mesh = dist.init_device_mesh("cpu", (world,))
    full = tinytorch.arange(64, dtype=tinytorch.float32).reshape(8, 8)
    out = {}
    if phase == "save":
        dcp.save({"w": distribute_tensor(full, mesh, [Shard(0)]), "step": 3}, checkpoint_id=path)
        # A value only rank 1 cannot store: every rank raises and no metadata is written.
        bad = {"w": distribute_tensor(full, mesh, [Shard(0)]), "extra": object() if rank == 1 else 1}
        try:
            dcp.save(bad, checkpoint_id=path + "_bad")
        except dcp.CheckpointException as e:
            out["save_error"] = (str(e), sorted(e.failures))
        out["bad_metadata"] = os.path.exists(os.path.join(path + "_bad", ".metadata"))
    else:
        target = {"w": distribute_tensor(tinytorch.zeros(8, 8), mesh, [Shard(0)]), "step": -1}
        try:
            dcp.load(target, checkpoint_id=path)
            out["loaded"] = target["w"].to_local().numpy().tolist()
        except dcp.CheckpointException as e:
            out["load_error"] = (str(e), sorted(e.failures))
        out["untouched"] = target["step"] == -1 and not target["w"].to_local().numpy().any()
    dist.destroy_process_group()
    return out


def test_a_corrupt_rank_file_fails_the_load_on_every_rank(tmp_path):
    path = str(tmp_path / "ck")
    saved = run_ranks(_sharded_worker, 2, path, "save", timeout=120)
    for r in saved:
        msg, failures = r["save_error"]
        assert failures == [1] and "dcp.save to" in msg and "rank 1: CheckpointException" in msg
        assert "cannot store a value of type object" in msg
        assert r["bad_metadata"] is False
    shard1 = os.path.join(path, "__1_0.distcp")
    raw = bytearray(open(shard1, "rb").read())
    raw[5] ^= 0x10
    open(shard1, "wb").write(raw)
    res = run_ranks(_sharded_worker, 2, path, "load", timeout=120)
    for r in res:
        msg, failures = r["load_error"]
        assert failures == [1]  # only rank 1 reads rank 1's rows at world 2 ...
        assert f"{shard1} (written by rank 1) is corrupt: item w (offsets [4, 0], sizes [4, 8]" in msg
        assert r["untouched"]  # ... and no rank took anything
    # One process over the same checkpoint needs every row: the same file is named.
    with pytest.raises(dcp.CheckpointException, match=r"__1_0.distcp \(written by rank 1\) is corrupt: item w"):
        dcp.load({"w": tinytorch.zeros(8, 8)}, checkpoint_id=path, no_dist=True)
    raw[5] ^= 0x10
    open(shard1, "wb").write(raw)
    res = run_ranks(_sharded_worker, 2, path, "load", timeout=120)
    assert res[1]["loaded"] == np.arange(32, 64, dtype=np.float32).reshape(4, 8).tolist()

