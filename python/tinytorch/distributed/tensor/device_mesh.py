"""torch.distributed.tensor.device_mesh: DeviceMesh and init_device_mesh under the DTensor package."""
from ..device_mesh import DeviceMesh, init_device_mesh  # noqa: F401

__all__ = ["DeviceMesh", "init_device_mesh"]
