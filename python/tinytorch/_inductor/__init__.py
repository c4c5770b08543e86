"""tinytorch._inductor: torch._inductor.config for scripts that tune the compiler before torch.compile. tinytorch's
compile runs eagerly (no inductor), so the settings are kept and read back but change nothing."""
from . import config  # noqa: F401
