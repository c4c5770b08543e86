"""tinytorch.func (vmap, grad, vjp, jvp, jacrev, jacfwd, hessian, functional_call, stack_module_state) and
tinytorch.nn.utils.stateless, checked against loops of ordinary backward calls, finite differences and
autograd.functional in float64, and against real torch.func when it is installed."""
import collections
import copy
import warnings

import numpy as np
import pytest

import tinytorch as torch
import tinytorch.func as F
import tinytorch.nn.utils.stateless as stateless
from tinytorch.autograd import functional as AF
from tinytorch.autograd import gradcheck


Pair = collections.namedtuple("Pair", "first second")


def t64(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def rand(*shape, seed=0, requires_grad=False):
    return t64(np.random.default_rng(seed).standard_normal(shape), requires_grad)


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a.detach().numpy() if hasattr(a, "detach") else a),
                               np.asarray(b.detach().numpy() if hasattr(b, "detach") else b), rtol=tol, atol=tol)


def numeric_jacobian(f, x, eps=1e-6):
    """Central differences of f (tensor -> tensor) at x: shape f(x).shape + x.shape."""
    base = x.detach().numpy().astype(np.float64)
    cols = []
    for k in range(base.size):
        d = np.zeros(base.size)
        d[k] = eps
        plus = f(t64(base + d.reshape(base.shape))).detach().numpy()
        minus = f(t64(base - d.reshape(base.shape))).detach().numpy()
        cols.append((plus - minus) / (2 * eps))
    out_shape = cols[0].shape
    return np.stack(cols, axis=-1).reshape(out_shape + base.shape)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 6)
        self.fc2 = torch.nn.Linear(6, 3)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x))) * self.scale


def make_mlp(seed=0):
    torch.manual_seed(seed)
    return MLP().double()


# ------------------------------------------------------------------ per-sample gradients (the torch.func tutorial)
def test_per_sample_grads_match_a_loop_of_backward_calls():
    model = make_mlp()
    data, targets = rand(8, 4, seed=1), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        predictions = F.functional_call(model, (params, buffers), (sample.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(predictions, target.unsqueeze(0))

    per_sample = F.vmap(F.grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, data, targets)
    assert set(per_sample) == set(params)
    for i in range(8):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(data[i:i + 1]), targets[i:i + 1]).backward()
        for name, p in model.named_parameters():
            assert per_sample[name].shape == (8,) + tuple(p.shape)
            close(per_sample[name][i], p.grad)
    assert not any(g.requires_grad for g in per_sample.values())
    assert all(p.grad_fn is None for p in model.parameters())  # the module got its own parameters back


def test_grad_and_value_with_aux_under_vmap():
    w = rand(3, seed=2)

    def loss(w, x):
        pred = (w * x).sum()
        return pred ** 2, pred

    grads, (values, preds) = F.vmap(F.grad_and_value(loss, has_aux=True), in_dims=(None, 0))(w, rand(5, 3, seed=3))
    x = rand(5, 3, seed=3)
    pred = (x * w).sum(1)
    close(preds, pred)
    close(values, pred ** 2)
    close(grads, 2 * pred[:, None] * x)


# ------------------------------------------------------------------ vmap
def test_vmap_in_dims_out_dims_and_none():
    x, y = rand(2, 3, seed=4), rand(3, seed=5)
    close(F.vmap(torch.mul, in_dims=(0, None))(x, y), x * y)
    close(F.vmap(torch.mul, in_dims=(1, None))(x.t().contiguous(), y), x * y)
    close(F.vmap(lambda a: a * 2, in_dims=-1, out_dims=-1)(x), x * 2)
    close(F.vmap(lambda a: a.sum(), in_dims=1)(x), x.sum(0))
    close(F.vmap(lambda a: a, out_dims=1)(x), x.t())
    close(F.vmap(lambda a: a, out_dims=(1,))(x), x.t())  # one tensor with a 1-tuple of out_dims
    unbatched = F.vmap(lambda a: (a * 2, y), out_dims=(0, None))(x)
    assert unbatched[1] is y
    close(F.vmap(lambda a: y)(x), y.expand(2, 3))  # an unbatched output gets the batch dim too
    assert F.vmap(lambda a: 3, out_dims=None)(x) == 3


def test_vmap_pytree_inputs_outputs_and_kwargs():
    x, y = rand(2, 3, seed=6), rand(3, seed=7)
    out = F.vmap(lambda d: {"s": d["a"] + d["b"], "p": [d["a"] * d["b"]]}, in_dims=({"a": 0, "b": None},))(
        {"a": x, "b": y})
    close(out["s"], x + y)
    close(out["p"][0], x * y)
    close(F.vmap(lambda pair: pair[0] - pair[1], in_dims=([0, None],))([x, y]), x - y)
    close(F.vmap(lambda pair: pair[0] - pair[1])((x, x * 3)), -2 * x)  # a leaf in_dim covers the whole subtree
    close(F.vmap(lambda a, *, scale: a * scale)(x, scale=y), x * y)  # keyword arguments are not batched
    res = F.vmap(lambda a: (a, [a.sum(), a]), out_dims=(1, [0, None]))(t64(np.ones((2, 3))))
    assert res[0].shape == (3, 2) and res[1][0].shape == (2,) and res[1][1].shape == (3,)


def test_vmap_container_kinds():
    x, y = rand(2, 3, seed=6), rand(3, seed=7)
    # dict in_dims fit an OrderedDict (and defaultdict) of inputs, as PyTorch's pytree lines dict kinds up by key
    args = collections.OrderedDict(a=x, b=y)
    close(F.vmap(lambda d: d["a"] + d["b"], in_dims=({"a": 0, "b": None},))(args), x + y)
    close(F.vmap(lambda d: d["a"] * d["b"], in_dims=({"b": None, "a": 0},))(collections.defaultdict(int, b=y, a=x)),
          x * y)
    close(F.vmap(lambda q: q[0] - q[1], in_dims=(collections.deque([0, None]),))(collections.deque([x, y])), x - y)
    out = F.vmap(lambda a: Pair(a, a.sum()), out_dims=Pair(1, 0))(x)
    assert type(out) is Pair
    close(out.first, x.t())
    close(out.second, x.sum(1))


def test_vmap_container_kinds_match_torch_func():
    real = pytest.importorskip("torch")

    def shapes(lib):
        x, y = lib.ones(2, 3), lib.ones(3)
        add = lambda d: d["a"] + d["b"]  # noqa: E731
        return [
            # PyTorch pairs in_dims with the inputs in the in_dims dict's key order
            tuple(lib.func.vmap(add, in_dims=({"b": None, "a": 0},))({"a": x, "b": y}).shape),
            tuple(lib.func.vmap(add, in_dims=({"a": 0, "b": None},))(collections.OrderedDict(a=x, b=y)).shape),
            tuple(lib.func.vmap(lambda q: q[0] + q[1], in_dims=(collections.deque([0, None], maxlen=5),))(
                collections.deque([x, y])).shape),
        ]

    assert shapes(torch) == shapes(real)


def test_vmap_nested_chunk_size_and_empty_batch():
    x, y = rand(4, 3, seed=8), rand(5, 3, seed=9)
    outer = F.vmap(F.vmap(lambda a, b: (a * b).sum(), in_dims=(None, 0)), in_dims=(0, None))(x, y)
    close(outer, x @ y.t())
    for chunk in (1, 3, 4, 10):
        close(F.vmap(lambda a: a.exp(), chunk_size=chunk)(x), x.exp())
    assert F.vmap(lambda a: a.sum())(torch.ones(0, 3)).shape == (0,)
    assert F.vmap(lambda a: a * 2, out_dims=1)(torch.ones(0, 3)).shape == (3, 0)


def test_vmap_is_differentiable():
    x = rand(3, 2, seed=10, requires_grad=True)
    assert gradcheck(lambda a: F.vmap(lambda r: r.sin() * r.sum())(a), (x,))
    assert gradcheck(lambda a: F.vmap(lambda c: c.exp(), in_dims=1, out_dims=0)(a), (x,))
    out = F.vmap(lambda r: (r ** 2).sum())(x)
    assert out.requires_grad
    out.sum().backward()
    close(x.grad, 2 * x)


def test_vmap_randomness():
    ones = torch.ones(3, 1)
    with pytest.raises(RuntimeError, match="called random operation while in randomness error mode"):
        F.vmap(lambda a: a + torch.rand(2))(ones)
    same = F.vmap(lambda a: torch.rand(2), randomness="same")(ones)
    assert torch.equal(same[0], same[1]) and torch.equal(same[0], same[2])
    different = F.vmap(lambda a: torch.rand(2), randomness="different")(ones)
    assert not torch.equal(different[0], different[1])
    with pytest.raises(RuntimeError, match="Only allowed values for randomness are 'error', 'different', or 'same'"):
        F.vmap(lambda a: a, randomness="sometimes")


@pytest.mark.parametrize("call, exc, message", [
    (lambda x, y: F.vmap(torch.add)(x, y[:1].expand(3, 3)), ValueError,
     r"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes \[2, 3\] for the mapped"),
    (lambda x, y: F.vmap(torch.add, in_dims=(None, None))(x, y), ValueError,
     "vmap: Expected at least one Tensor to vmap over"),
    (lambda x, y: F.vmap(torch.add, in_dims=None)(x, y), ValueError,
     r"expected `in_dims` to be int or a \(potentially nested\) tuple matching the structure of inputs, got: "
     "<class 'NoneType'>"),
    (lambda x, y: F.vmap(torch.add, in_dims=(0,))(x, y), ValueError,
     r"in_dims is not compatible with the structure of `inputs`. in_dims has structure "
     r"TreeSpec\(tuple, None, \[\*\]\) but inputs has structure TreeSpec\(tuple, None, \[\*,\n  \*\]\)."),
    (lambda x, y: F.vmap(torch.add, in_dims=(0, 2))(x, x), ValueError,
     r"Got in_dim=2 for some input, but that input is a Tensor of dimensionality 2 so expected in_dim to satisfy "
     r"-2 <= in_dim < 2."),
    (lambda x, y: F.vmap(torch.add, in_dims=(0, "a"))(x, x), ValueError,
     "Got in_dim=a for an input but in_dim must be either an integer dimension or None."),
    (lambda x, y: F.vmap(torch.mul)(x, 2), ValueError,
     r"Got in_dim=0 for an input but the input is of type <class 'int'>. We cannot vmap over non-Tensor arguments"),
    (lambda x, y: F.vmap(lambda: x)(), ValueError, r"vmap\(<lambda>\)\(<inputs>\): got no inputs."),
    (lambda x, y: F.vmap(lambda a: 3)(x), ValueError,
     r"vmap\(<lambda>, ...\): `<lambda>` must only return Tensors, got type <class 'int'>. Did you mean to set "
     "out_dims= to None for output?"),
    (lambda x, y: F.vmap(lambda a: a, out_dims=None)(x), ValueError,
     "`<lambda>` can not return a BatchedTensor when out_dim is None"),
    (lambda x, y: F.vmap(lambda a: a, out_dims=(0, 1))(x), ValueError,
     "out_dims is not compatible with the structure of `outputs`"),
    (lambda x, y: F.vmap(lambda a: a, out_dims=3)(x), IndexError, "Dimension out of range"),
    (lambda x, y: F.vmap(lambda a: a, out_dims="a")(x), ValueError, "`out_dims` must be an int, None or a python"),
    (lambda x, y: F.vmap(lambda a: a, chunk_size=0)(x), ValueError,
     r"vmap: chunk_size should be None or greater than 0. \(got 0\)"),
])
def test_vmap_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call(rand(2, 3), rand(3, 3))


# ------------------------------------------------------------------ grad, vjp, jvp, jacrev, hessian
def f_vec(x):
    return x.sin() * x.sum() + x ** 3


def test_grad_matches_finite_differences_and_argnums():
    x, y = rand(4, seed=11), rand(4, seed=12)
    scalar = lambda a, b: (a.sin() * b).sum() + (a * a * b).sum()  # noqa: E731
    close(F.grad(scalar)(x, y), numeric_jacobian(lambda a: scalar(a, y), x), 1e-7)
    gx, gy = F.grad(scalar, argnums=(0, 1))(x, y)
    close(gy, numeric_jacobian(lambda b: scalar(x, b), y), 1e-7)
    close(F.grad(scalar, argnums=-1)(x, y), gy)
    tree = F.grad(lambda d: (d["a"] * d["b"][0]).sum())({"a": x, "b": [y]})
    close(tree["a"], y)
    close(tree["b"][0], x)
    close(F.grad(lambda a, b: a.sum(), argnums=(0, 1))(x, y)[1], torch.zeros(4))  # unused input: zeros


def test_grad_composes_and_stays_differentiable():
    x = rand(3, seed=13)
    close(F.grad(lambda a: F.grad(lambda b: (b ** 3).sum())(a).sum())(x), 6 * x)
    close(F.grad(F.grad(lambda a: a.sin()))(x[0]), -x[0].sin())
    assert gradcheck(F.grad(lambda a: (a.sin() * a).sum()), (rand(3, seed=14, requires_grad=True),))
    xr = rand(3, seed=15, requires_grad=True)
    g = F.grad(lambda a: (a ** 3).sum())(xr)
    assert g.requires_grad
    g.sum().backward()
    close(xr.grad, 6 * xr)
    w = rand(3, seed=16, requires_grad=True)
    g = F.grad(lambda a: ((a * w) ** 2).sum())(x)  # depends on a closed-over tensor that requires grad
    g.sum().backward()
    close(w.grad, 4 * x * w)
    with torch.no_grad():  # grad ignores an enclosing no_grad, as torch.func.grad does
        close(F.grad(lambda a: (a ** 2).sum())(x), 2 * x)
    assert not F.grad(lambda a: (a ** 2).sum())(x).requires_grad


def test_vjp_and_jvp_match_autograd_functional():
    x, v = rand(4, seed=17), rand(4, seed=18)
    out, vjp_fn = F.vjp(f_vec, x)
    ref_out, ref_vjp = AF.vjp(f_vec, x, v)
    close(out, ref_out)
    (g,) = vjp_fn(v)
    close(g, ref_vjp)
    close(vjp_fn(v)[0], ref_vjp)  # vjp_fn can be called again
    out, tangent = F.jvp(f_vec, (x,), (v,))
    close(tangent, AF.jvp(f_vec, x, v)[1])
    close(tangent, numeric_jacobian(f_vec, x) @ v.numpy(), 1e-7)
    (o1, o2), vjp_fn = F.vjp(lambda a, b: (a * b, a + b), x, v)
    ga, gb = vjp_fn((torch.ones(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)))
    close(ga, v)
    close(gb, x)
    out, fn = F.linearize(f_vec, x)
    close(fn(v), tangent)


def test_jacrev_jacfwd_hessian():
    x = rand(3, seed=19)
    close(F.jacrev(f_vec)(x), numeric_jacobian(f_vec, x), 1e-7)
    close(F.jacfwd(f_vec)(x), AF.jacobian(f_vec, x))
    scalar = lambda a: (a.sin() * a.sum()).sum()  # noqa: E731
    close(F.hessian(scalar)(x), AF.hessian(scalar, x))
    close(F.hessian(scalar)(x), numeric_jacobian(lambda a: AF.jacobian(scalar, a), x), 1e-6)
    ja, jb = F.jacrev(lambda a, b: a * b.sum(), argnums=(0, 1))(x, x[:2])
    assert ja.shape == (3, 3) and jb.shape == (3, 2)
    jac, aux = F.jacrev(lambda a: (a * 2, a.sum()), has_aux=True)(x)
    close(jac, 2 * torch.eye(3, dtype=torch.float64))
    close(aux, x.sum())
    close(F.vmap(F.jacrev(torch.sin))(rand(2, 3, seed=20))[1], torch.diag(rand(2, 3, seed=20)[1].cos()))


@pytest.mark.parametrize("call, exc, message", [
    (lambda x: F.grad(lambda a: a ** 2)(x), RuntimeError,
     r"grad_and_value\(f\)\(\*args\): Expected f\(\*args\) to return a scalar Tensor, got tensor with 2 dims. "
     "Maybe you wanted to use the vjp or jacrev APIs instead?"),
    (lambda x: F.grad(lambda a: 3.0)(x), RuntimeError, "Expected f\\(\\*args\\) to return a Tensor, got <class"),
    (lambda x: F.grad(lambda a: a.sum(), has_aux=True)(x), RuntimeError,
     r"output of function f should be a tuple: \(output, aux\) if has_aux is True"),
    (lambda x: F.grad(lambda a: a.sum(), argnums=1)(x), RuntimeError, "Got argnum=1, but only 1 positional inputs"),
    (lambda x: F.grad(lambda a: a.sum(), argnums=())(x), RuntimeError, "argnums must be non-empty"),
    (lambda x: F.grad(lambda a: a.sum(), argnums=1.0)(x), RuntimeError, "argnums must be int or Tuple"),
    (lambda x: F.grad(lambda a: a)(3.0), ValueError, "Thing passed to transform API must be Tensor, got <class"),
    (lambda x: F.vjp(lambda a: 3, x), RuntimeError,
     r"vjp\(f, \*primals\): expected f\(\*primals\) to return only tensors, got unsupported type <class 'int'>"),
    (lambda x: F.vjp(lambda a: a, x)[1]((x, x)), RuntimeError,
     r"Expected pytree structure of cotangents to be the same as pytree structure of outputs to the function. "
     r"cotangents: \(\*, \*\), primal output: \*"),
    (lambda x: F.vjp(lambda a: a, x)[1](x[0]), RuntimeError, "Mismatch in shape: grad_output\\[0\\] has a shape of"),
    (lambda x: F.jvp(lambda a: a, x, x), RuntimeError, "jvp\\(f, primals, tangents\\): Expected primals to be a tuple"),
    (lambda x: F.jvp(lambda a: a, (x,), (x, x)), RuntimeError,
     "Expected primals and tangents to have the same python structure"),
    (lambda x: F.jvp(lambda a: a, (x,), (x[0],)), RuntimeError,
     "Trying to set a forward gradient that has a different size than that of the original Tensor"),
])
def test_transform_errors(call, exc, message):
    with pytest.raises(exc, match=message):
        call(rand(2, 3))


# ------------------------------------------------------------------ functional_call
class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.foo = torch.nn.Parameter(torch.ones(()))
        self.foo_tied = self.foo
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count = self.count + 1  # reassigned during the call: shows up in the caller's dict
        return x + self.foo + self.foo_tied


def test_functional_call_swaps_and_restores():
    model = make_mlp()
    originals = {k: v for k, v in model.named_parameters()}
    new = {k: v.detach() * 0 + 0.5 for k, v in originals.items()}
    x = rand(2, 4, seed=21)
    out = F.functional_call(model, new, (x,))
    with torch.no_grad():
        ref = ((torch.tanh(x @ new["fc1.weight"].t() + new["fc1.bias"]) @ new["fc2.weight"].t())
               + new["fc2.bias"]) * 2
    close(out, ref)
    assert all(p is originals[k] for k, p in model.named_parameters())
    close(F.functional_call(model, {"scale": t64(3.0)}, x), model(x) * 1.5)  # buffers, a non-tuple arg
    close(F.functional_call(model, ({"fc1.bias": new["fc1.bias"]}, {"scale": t64(1.0)}), (x,)),
          F.functional_call(model, {"fc1.bias": new["fc1.bias"], "scale": t64(1.0)}, x))


def test_functional_call_gradients_flow_to_the_passed_tensors():
    model = make_mlp()
    params = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters()}
    x = rand(3, 4, seed=22)
    F.functional_call(model, params, (x,)).sum().backward()
    model(x).sum().backward()
    for k, p in model.named_parameters():
        close(params[k].grad, p.grad)


def test_functional_call_restores_after_an_exception():
    class Boom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            raise ValueError("boom")

    model = Boom()
    original = model.w
    with pytest.raises(ValueError, match="boom"):
        F.functional_call(model, {"w": torch.zeros(2), "extra": torch.zeros(1)}, (torch.ones(2),))
    assert model.w is original and isinstance(model.w, torch.nn.Parameter)
    assert not hasattr(model, "extra")


def test_functional_call_tie_weights_strict_and_write_back():
    model = Tied()
    values = {"foo": torch.zeros(()), "count": torch.full((), 5.0)}
    assert F.functional_call(model, values, torch.zeros(())).item() == 0.0  # foo_tied follows foo
    assert values["count"].item() == 6.0 and model.count.item() == 0.0
    assert F.functional_call(model, {"foo": torch.zeros(())}, torch.zeros(()), tie_weights=False).item() == 1.0
    with pytest.raises(ValueError, match=r"functional_call got multiple values for keys \['foo', 'foo_tied'\], which "
                                         "are tied. Consider using tie_weights=False"):
        F.functional_call(model, {"foo": torch.zeros(()), "foo_tied": torch.ones(())}, torch.zeros(()))
    with pytest.raises(RuntimeError, match="Error\\(s\\) in reparametrizing for Tied:\n\tUnexpected key\\(s\\): "
                                           "'bar'.\n\tMissing key\\(s\\): 'count', 'foo', 'foo_tied'."):
        F.functional_call(model, {"bar": torch.ones(())}, torch.zeros(()), strict=True)
    with pytest.raises(ValueError, match=r"\['foo'\] appeared in multiple dictionaries"):
        F.functional_call(model, [{"foo": torch.ones(())}, {"foo": torch.ones(())}], torch.zeros(()))
    with pytest.raises(ValueError, match="Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts"):
        F.functional_call(model, 3, torch.zeros(()))
    with pytest.raises(TypeError, match="3 is not an instance of torch.Tensor"):
        F.functional_call(model, {"foo": 3}, torch.zeros(()))
    with pytest.raises(AttributeError, match="Tied has no attribute `sub`"):
        F.functional_call(model, {"sub.w": torch.ones(())}, torch.zeros(()))
    assert model.foo is model.foo_tied and model.foo.item() == 1.0


def test_stateless_functional_call_is_the_deprecated_alias():
    model = make_mlp()
    x = rand(2, 4, seed=23)
    with pytest.warns(FutureWarning, match="torch.nn.utils.stateless.functional_call` is deprecated"):
        out = stateless.functional_call(model, {"scale": t64(1.0)}, (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        close(out, F.functional_call(model, {"scale": t64(1.0)}, (x,)))


def test_stack_module_state_ensembling():
    models = [make_mlp(seed) for seed in range(3)]
    params, buffers = F.stack_module_state(models)
    assert params["fc1.weight"].shape == (3, 6, 4) and buffers["scale"].shape == (3,)
    assert params["fc1.weight"].is_leaf and params["fc1.weight"].requires_grad
    assert not buffers["scale"].requires_grad
    base = copy.deepcopy(models[0])
    x = rand(5, 4, seed=24)
    out = F.vmap(lambda p, b, inp: F.functional_call(base, (p, b), (inp,)), in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        close(out[i], m(x))
    out.sum().backward()
    assert params["fc2.bias"].grad.shape == (3, 3)
    with pytest.raises(RuntimeError, match="stack_module_state: Expected at least one model, got 0."):
        F.stack_module_state([])
    with pytest.raises(RuntimeError, match="stack_module_state: Expected all models to be of the same class."):
        F.stack_module_state([models[0], torch.nn.Linear(2, 2)])
    models[1].eval()
    with pytest.raises(RuntimeError, match="stack_module_state: Expected all models to have the same training/eval"):
        F.stack_module_state(models)
    models[1].train()
    models[1].fc1.bias.requires_grad_(False)
    with pytest.raises(RuntimeError, match="Expected fc1.bias from each model to have the same .requires_grad"):
        F.stack_module_state(models)


def test_functionalize_is_the_function():
    def inplace(x):
        y = x.clone()
        y.add_(1)
        return y

    close(F.functionalize(inplace)(t64([1.0, 2.0])), t64([2.0, 3.0]))


# ------------------------------------------------------------------ parity with real torch.func
def test_parity_with_torch_func():
    real = pytest.importorskip("torch")
    rng = np.random.default_rng(25)
    w1, b1, w2, x, v = (rng.standard_normal(s) for s in ((5, 4), (5,), (2, 5), (6, 4), (4,)))

    def run(lib, tensor):
        P = {"w1": tensor(w1), "b1": tensor(b1), "w2": tensor(w2)}
        X = tensor(x)

        def loss(p, sample):
            return (lib.tanh(sample @ p["w1"].t() + p["b1"]) @ p["w2"].t()).pow(2).sum()

        f = lambda a: a.sin() * a.sum()  # noqa: E731
        per_sample = lib.func.vmap(lib.func.grad(loss), in_dims=(None, 0))(P, X)
        return {
            "psg_w1": per_sample["w1"], "psg_b1": per_sample["b1"],
            "hess": lib.func.hessian(lambda a: loss(P, a))(X[0]),
            "jacrev": lib.func.jacrev(f)(tensor(v)),
            "jvp": lib.func.jvp(f, (tensor(v),), (tensor(v * 2),))[1],
            "vjp": lib.func.vjp(f, tensor(v))[1](tensor(v + 1))[0],
            "vmap_out1": lib.func.vmap(lambda a, b: a[:, None] * b, in_dims=(1, None), out_dims=2)(X, tensor(b1)),
        }

    ours = run(torch, lambda a: torch.tensor(a, dtype=torch.float64))
    ref = run(real, lambda a: real.tensor(a, dtype=real.float64))
    for key in ref:
        np.testing.assert_allclose(ours[key].detach().numpy(), ref[key].detach().numpy(), rtol=1e-10, atol=1e-10,
                                   err_msg=key)


def _error_cases(lib):
    """Bad calls of the transforms, as (name, thunk) for the library `lib` (tinytorch or torch)."""
    fn = lib.func
    x, y = lib.ones(2, 3), lib.ones(3, 3)
    add = lambda a, b: a + b  # noqa: E731
    return [
        ("bsize", lambda: fn.vmap(add)(x, y)),
        ("in_dims None", lambda: fn.vmap(add, in_dims=None)(x, y)),
        ("nothing batched", lambda: fn.vmap(add, in_dims=(None, None))(x, y)),
        ("in_dims length", lambda: fn.vmap(add, in_dims=(0,))(x, y)),
        ("in_dim range", lambda: fn.vmap(add, in_dims=(0, -3))(x, x)),
        ("scalar input", lambda: fn.vmap(lambda a: a)(lib.ones(()))),
        ("dict in_dims", lambda: fn.vmap(lambda d: d["a"], in_dims=({"a": 0, "c": None},))({"a": x, "b": x})),
        ("returns None", lambda: fn.vmap(lambda a: None)(x)),
        ("out_dims structure", lambda: fn.vmap(lambda a: (a, a), out_dims=(0, 1, 2))(x)),
        ("in_dims tuple for namedtuple", lambda: fn.vmap(lambda p: p.first, in_dims=((0, None),))(Pair(x, y))),
        ("in_dims list for tuple", lambda: fn.vmap(lambda p: p[0], in_dims=([0, None],))((x, y))),
        ("out_dims dict keys", lambda: fn.vmap(lambda a: {"a": a}, out_dims={"b": 0})(x)),
        ("grad aux arity", lambda: fn.grad(lambda a: (a.sum(), 1, 2), has_aux=True)(x)),
        ("argnum type", lambda: fn.grad(lambda a: a.sum(), argnums=(0, "a"))(x)),
        ("integer input", lambda: fn.grad(lambda a: a.sum())(lib.arange(3))),
        ("argnums unique", lambda: fn.grad(lambda a, b: a.sum(), argnums=(0, 0))(x, x)),
        ("no positional", lambda: fn.grad(lambda: x.sum())()),
        ("vjp aux", lambda: fn.vjp(lambda a: a, x, has_aux=True)),
        ("jvp no primals", lambda: fn.jvp(lambda: x, (), ())),
        ("jvp returns int", lambda: fn.jvp(lambda a: 3, (x,), (x,))),
        ("jacrev returns int", lambda: fn.jacrev(lambda a: 3)(x)),
        ("jacrev aux", lambda: fn.jacrev(lambda a: a, has_aux=True)(x)),
        ("jacrev chunk", lambda: fn.jacrev(lambda a: a, chunk_size=0)(x)),
        ("vjp cotangent tree", lambda: fn.vjp(lambda a: {"o": a, "p": [a]}, x)[1]({"o": x, "p": (x,)})),
        ("functional_call dict list", lambda: fn.functional_call(lib.nn.Linear(2, 2), [3], lib.ones(2))),
        ("functionalize remove", lambda: fn.functionalize(lambda a: a, remove="x")(x)),
    ]


def test_error_messages_match_torch_func():
    real = pytest.importorskip("torch")

    def outcome(thunk):
        try:
            thunk()
        except Exception as e:  # noqa: BLE001 - the error itself is what is compared
            return type(e).__name__, str(e)
        return None

    ours, theirs = _error_cases(torch), _error_cases(real)
    for (name, mine), (_, ref) in zip(ours, theirs):
        expected = outcome(ref)
        assert expected is not None, name
        assert outcome(mine) == expected, name


def test_replace_all_batch_norm_modules_and_debug_unwrap():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    assert F.replace_all_batch_norm_modules_(model) is model
    bn = model[1]
    assert bn.running_mean is None and bn.running_var is None and not bn.track_running_stats
    assert dict(model.named_buffers()) == {}
    x = rand(5, 3)
    assert F.debug_unwrap(x) is x


def test_jacrev_is_differentiable_and_pytree_jvp():
    assert gradcheck(lambda a: F.jacrev(f_vec)(a), (rand(3, seed=26, requires_grad=True),))
    x, y = rand(3, seed=27), rand(2, seed=28)
    out, tangents = F.jvp(lambda d, b: [d["a"] * b.sum(), b * 2], ({"a": x}, y), ({"a": x}, y))
    close(out[0], x * y.sum())
    close(tangents[0], x * y.sum() + x * y.sum())
    close(tangents[1], 2 * y)


def test_tutorial_compositions_hvp_and_ntk():
    x, v = rand(4, seed=29), rand(4, seed=30)
    f = lambda a: (a.sin() * a.sum()).sum()  # noqa: E731
    close(F.jvp(F.grad(f), (x,), (v,))[1], AF.hvp(f, x, v)[1])  # forward-over-reverse hvp
    net = make_mlp(1)
    params = {k: p.detach() for k, p in net.named_parameters()}
    x1, x2 = rand(3, 4, seed=31), rand(2, 4, seed=32)

    def single(p, sample):
        return F.functional_call(net, p, (sample.unsqueeze(0),)).squeeze(0)

    jac1 = [j.flatten(2) for j in F.vmap(F.jacrev(single), (None, 0))(params, x1).values()]
    jac2 = [j.flatten(2) for j in F.vmap(F.jacrev(single), (None, 0))(params, x2).values()]
    explicit = torch.stack([torch.einsum("Naf,Mbf->NMab", a, b) for a, b in zip(jac1, jac2)]).sum(0)

    def ntk_pair(s1, s2):
        out, vjp_fn = F.vjp(lambda p: single(p, s1), params)
        basis = torch.eye(out.numel(), dtype=out.dtype)
        return F.vmap(lambda vec: F.jvp(lambda p: single(p, s2), (params,), vjp_fn(vec))[1])(basis)

    implicit = F.vmap(F.vmap(ntk_pair, (None, 0)), (0, None))(x1, x2)
    assert explicit.shape == implicit.shape == (3, 2, 3, 3)
    close(implicit, explicit)


def test_results_require_grad_exactly_when_torch_func_results_do():
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    c = torch.ones(3, dtype=torch.float64)
    w = torch.full((3,), 2.0, dtype=torch.float64, requires_grad=True)
    sq = lambda a: a ** 2  # noqa: E731
    assert F.grad(lambda a: sq(a).sum())(x).requires_grad
    assert not F.grad(lambda a: sq(a).sum())(c).requires_grad
    assert F.grad(lambda a: (a * w).sum())(c).requires_grad
    assert [t.requires_grad for t in F.grad_and_value(lambda a: sq(a).sum())(c)] == [False, False]
    out, vjp_fn = F.vjp(sq, c)
    assert not out.requires_grad and not vjp_fn(c)[0].requires_grad and vjp_fn(x)[0].requires_grad
    assert [t.requires_grad for t in F.jvp(sq, (c,), (x,))] == [False, True]
    assert [t.requires_grad for t in F.jvp(sq, (x,), (c,))] == [True, True]
    assert F.jacrev(sq)(x).requires_grad and not F.jacrev(sq)(c).requires_grad
    with torch.no_grad():
        assert not F.grad(lambda a: sq(a).sum())(x).requires_grad
