"""The reference workloads' models, now in tinytorch.bench.workloads (kept so the benchmark scripts and
../shared/bench read them from one place)."""
from tinytorch.bench.workloads import batch, gpt, mlp  # noqa: F401
