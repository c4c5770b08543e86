"""Shared fixtures: every device-aware test runs on cpu, and on cuda when a GPU is present."""
import os
import sys

import pytest

import tinytorch

DEVICES = ["cpu"] + (["cuda"] if tinytorch.cuda.is_available() else [])
if os.environ.get("TINYTORCH_TEST_DEVICE") == "cuda" and "cuda" not in DEVICES:
    sys.exit("TINYTORCH_TEST_DEVICE=cuda but no usable GPU: refusing to pass silently")


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    """The device a device-aware test runs on."""
    return request.param


@pytest.fixture(autouse=True)
def _seed():
    tinytorch.manual_seed(0)
    yield


@pytest.fixture(autouse=True, scope="session")
def _flight_recorder_dumps(tmp_path_factory):
    """Flight-recorder dumps of tests whose collectives fail go to a temporary folder, not ~/.cache/torch."""
    os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path_factory.mktemp("fr_dumps") / "rank_"))
