"""torch._inductor.config's settings that training scripts set (gpt-fast, nanoGPT forks, torchtitan): stored and
read back, used by nothing (tinytorch.compile is eager)."""
from types import SimpleNamespace

coordinate_descent_tuning = False
coordinate_descent_check_all_directions = False
epilogue_fusion = True
fx_graph_cache = True
force_fuse_int_mm_with_mul = False
freezing = False
max_autotune = False
max_autotune_gemm = False
use_mixed_mm = False
debug = False
triton = SimpleNamespace(unique_kernel_names=False, cudagraphs=False, cudagraph_trees=True)
cpp = SimpleNamespace(enable_kernel_profile=False, threads=-1)
