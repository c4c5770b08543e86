"""tinytorch.func: PyTorch's composable function transforms (vmap, grad, vjp, jvp, jacrev, jacfwd, hessian) and
functional_call, on tinytorch's eager autograd. vmap runs the function once per example (no batching rules)."""
from ._eager_transforms import (functionalize, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, linearize,
                                vjp)
from ._functional_call import functional_call, stack_module_state
from ._module_utils import debug_unwrap, replace_all_batch_norm_modules_
from ._vmap import vmap

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize",
           "functionalize", "functional_call", "stack_module_state", "replace_all_batch_norm_modules_", "debug_unwrap"]
