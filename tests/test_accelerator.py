"""tinytorch.accelerator (PyTorch 2.6+'s torch.accelerator): answers on this machine, errors without a GPU."""
import warnings

import pytest

import tinytorch as torch

A = torch.accelerator
HAS_GPU = torch.cuda.is_available()


def test_queries_agree_with_cuda():
    assert A.is_available() is HAS_GPU
    assert A.device_count() == (torch.cuda.device_count() if HAS_GPU else 0)
    acc = A.current_accelerator(check_available=True)
    assert (acc == torch.device("cuda")) if HAS_GPU else acc is None
    unchecked = A.current_accelerator()
    assert unchecked is None or (isinstance(unchecked, torch.device) and unchecked.type == "cuda"
                                 and unchecked.index is None)


@pytest.mark.skipif(HAS_GPU, reason="checks the answers without an accelerator")
def test_without_accelerator_matches_pytorch_errors():
    for call in (A.current_device_index, A.synchronize, lambda: A.set_device_index(0)):
        with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is available"):
            call()
    for dev in ("cpu", "cuda:0", torch.device("cpu")):
        with pytest.raises(RuntimeError, match="Accelerator expected"):
            A.set_device_index(dev)
    A.set_device_index(-1)  # a negative index is a no-op, as in PyTorch
    with A.device_index(None):  # None: no switching, no error
        pass
    with pytest.raises(RuntimeError, match="Cannot access accelerator device"):
        with A.device_index(0):
            pass


def test_deprecated_aliases_warn():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            A.current_device_idx()
        except RuntimeError:
            assert not HAS_GPU
        A.set_device_idx(-1)
    assert sum(issubclass(x.category, DeprecationWarning) for x in w) == 2
    assert "current_device_index" in str(w[0].message) and "set_device_index" in str(w[1].message)


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_with_gpu_index_switching_and_synchronize():
    start = A.current_device_index()
    last = A.device_count() - 1
    with A.device_index(last):
        assert A.current_device_index() == last == torch.cuda.current_device()
        x = torch.ones(3, device="cuda") * 2
        A.synchronize()
        A.synchronize(torch.device("cuda", last))
    assert A.current_device_index() == start
    A.set_device_index(f"cuda:{last}")
    assert torch.cuda.current_device() == last
    A.set_device_index(start)
    assert float(x.sum()) == 6.0
    with pytest.raises(RuntimeError, match="Accelerator expected"):
        A.set_device_index("cpu")


def test_matches_pytorch_on_this_machine():
    real = pytest.importorskip("torch")
    if not hasattr(real, "accelerator"):
        pytest.skip("this torch has no torch.accelerator")
    if real.accelerator.is_available() != A.is_available():
        pytest.skip("torch and tinytorch see different accelerators here")
    assert A.device_count() == real.accelerator.device_count()
    ours, theirs = A.current_accelerator(check_available=True), real.accelerator.current_accelerator(True)
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert str(ours) == str(theirs)
