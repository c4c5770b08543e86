"""tinytorch.utils._pytree: flatten/unflatten round trips, specs, key paths, registration, serialization, and
parity of leaves and specs with torch.utils._pytree."""
import collections
import dataclasses
import json

import numpy as np
import pytest

import tinytorch
import tinytorch.utils._pytree as pytree

NT = collections.namedtuple("NT", "a b")


def _nested():
    return {"b": (1, [2, 3]), "a": None, "c": NT(4, 5), "d": collections.OrderedDict(y=6, x=7),
            "e": collections.defaultdict(list, {"k": 8}), "f": collections.deque([9, 10], maxlen=4)}


def test_flatten_order_and_round_trip():
    tree = _nested()
    leaves, spec = pytree.tree_flatten(tree)
    # dict keys in insertion order, None a leaf, every container's children in order
    assert leaves == [1, 2, 3, None, 4, 5, 6, 7, 8, 9, 10]
    back = pytree.tree_unflatten(leaves, spec)
    assert back == tree
    assert type(back["c"]) is NT and type(back["d"]) is collections.OrderedDict
    assert type(back["e"]) is collections.defaultdict and back["e"].default_factory is list
    assert back["f"].maxlen == 4
    assert list(back) == ["b", "a", "c", "d", "e", "f"]


def test_spec_fields_and_repr():
    spec = pytree.tree_structure(_nested())
    assert spec.type is dict and spec.context == ["b", "a", "c", "d", "e", "f"]
    assert (spec.num_leaves, spec.num_children, spec.num_nodes) == (11, 6, 18)
    assert spec.child(2).type is collections.namedtuple and spec.child(2).context is NT
    assert repr(pytree.tree_structure((1, [2, 3]))) == \
        "TreeSpec(tuple, None, [*,\n  TreeSpec(list, None, [*,\n    *])])"
    assert repr(pytree.tree_structure(5)) == "*" and pytree.tree_structure(5).is_leaf()
    assert repr(pytree.tree_structure({})) == "TreeSpec(dict, [], [])"
    assert pytree.treespec_pprint(pytree.tree_structure({"a": (1, [2]), "n": NT(1, 2)})) == \
        "{'a': (*, [*]), 'n': NT(a=*, b=*)}"


def test_spec_equality():
    assert pytree.tree_structure((1, 2)) == pytree.tree_structure(("x", None))
    assert pytree.tree_structure((1, 2)) != pytree.tree_structure([1, 2])
    assert pytree.tree_structure({"a": 1, "b": 2}) != pytree.tree_structure({"b": 2, "a": 1})
    assert pytree.tree_structure(collections.OrderedDict(a=1)) != pytree.tree_structure({"a": 1})
    assert pytree.tree_structure(1) == pytree.LeafSpec()
    assert hash(pytree.tree_structure((1, [2]))) == hash(pytree.tree_structure((3, [4])))


def test_leaves_of_leaf_and_empty_containers():
    assert pytree.tree_leaves(None) == [None]
    assert pytree.tree_leaves(3) == [3]
    assert pytree.tree_leaves(([], {}, ())) == []
    assert pytree.tree_unflatten([], pytree.tree_structure(([], {}))) == ([], {})
    assert pytree.tree_is_leaf(None) and not pytree.tree_is_leaf([])


def test_tensor_size_and_return_types():
    t = tinytorch.ones(2, 3)
    leaves, spec = pytree.tree_flatten({"x": t, "shape": t.shape})
    assert leaves[0] is t and leaves[1:] == [2, 3]
    assert type(pytree.tree_unflatten(leaves, spec)["shape"]) is tinytorch.Size
    result = tinytorch.max(tinytorch.tensor([[1.0, 5.0], [3.0, 2.0]]), 1)
    leaves, spec = pytree.tree_flatten(result)
    assert len(leaves) == 2 and spec.type is type(result) and spec.context is None
    rebuilt = pytree.tree_unflatten([v * 2 for v in leaves], spec)
    assert type(rebuilt) is type(result)
    np.testing.assert_array_equal(rebuilt.values.numpy(), [10.0, 6.0])


def test_is_leaf_stops_descent():
    tree = (1, [2, [3]])
    assert pytree.tree_leaves(tree, is_leaf=lambda x: isinstance(x, list)) == [1, [2, [3]]]
    assert pytree.tree_map(lambda x: len(x) if isinstance(x, list) else x, tree,
                           is_leaf=lambda x: isinstance(x, list)) == (1, 2)


def test_tree_map_and_multiple_trees():
    assert pytree.tree_map(lambda x: x * 10, {"a": (1, 2), "b": [3]}) == {"a": (10, 20), "b": [30]}
    assert pytree.tree_map(lambda x, y: x + y, (1, [2, 3]), (10, [20, 30])) == (11, [22, 33])
    # the other trees may hold subtrees where the first has leaves
    assert pytree.tree_map(lambda x, y: (x, y), (1, 2), (4, [5, 6])) == ((1, 4), (2, [5, 6]))
    # dicts line up by key, not by position
    assert pytree.tree_map(lambda x, y: (x, y), {"a": 1, "b": 2}, {"b": 3, "a": 4}) == {"a": (1, 4), "b": (2, 3)}


@pytest.mark.parametrize("other, message", [
    ([3, 4], "Node type mismatch; expected <class 'tuple'>, but got <class 'list'>."),
    ((3,), "Node arity mismatch; expected 2, but got 1."),
])
def test_tree_map_structure_mismatch(other, message):
    with pytest.raises(ValueError) as e:
        pytree.tree_map(lambda x, y: x, (1, 2), other)
    assert str(e.value) == message


def test_tree_map_dict_key_mismatch():
    with pytest.raises(ValueError, match=r"Node keys mismatch; missing key\(s\): \{'a'\}; extra key\(s\): \{'b'\}"):
        pytree.tree_map(lambda x, y: x, {"a": 1}, {"b": 1})


def test_unflatten_errors():
    with pytest.raises(ValueError, match="`leaves` has length 1 but the spec refers to a pytree that holds 2 items"):
        pytree.tree_unflatten([1], pytree.tree_structure((1, 2)))
    with pytest.raises(TypeError, match="Expected `treespec` to be an instance of PyTreeSpec"):
        pytree.tree_unflatten([1], 5)


def test_map_only_all_any_and_inplace():
    tree = (1, 2.0, "s", [3])
    assert pytree.tree_map_only(int, lambda x: -x, tree) == (-1, 2.0, "s", [-3])
    assert pytree.tree_map_only((int, float), lambda x: -x, tree) == (-1, -2.0, "s", [-3])
    assert pytree.tree_map_only(lambda x: x == "s", str.upper, tree) == (1, 2.0, "S", [3])
    assert pytree.tree_all(lambda x: x > 0, (1, [2])) and not pytree.tree_all(lambda x: x > 1, (1, [2]))
    assert pytree.tree_any(lambda x: x > 1, (1, [2])) and not pytree.tree_any(lambda x: x > 2, (1, [2]))
    assert pytree.tree_all_only(int, lambda x: x > 0, (1, "s", -1.0))
    assert not pytree.tree_any_only(str, lambda x: x == "t", (1, "s"))
    seen = []
    assert pytree.tree_map_(seen.append, {"a": [1, 2]}) == {"a": [1, 2]} and seen == [1, 2]
    seen.clear()
    pytree.tree_map_only_(int, seen.append, (1, "x", 2))
    assert seen == [1, 2]


def test_tensors_as_leaves():
    params = {"w": tinytorch.ones(2, 2), "b": [tinytorch.zeros(2)]}
    doubled = pytree.tree_map_only(tinytorch.Tensor, lambda t: t * 2, params)
    np.testing.assert_array_equal(doubled["w"].numpy(), np.full((2, 2), 2.0))
    assert pytree.tree_all_only(tinytorch.Tensor, lambda t: t.dim() >= 1, params)


def test_key_paths():
    tree = {"b": (1, [2]), "n": NT(3, 4)}
    pairs, spec = pytree.tree_flatten_with_path(tree)
    assert [pytree.keystr(kp) for kp, _ in pairs] == ["['b'][0]", "['b'][1][0]", "['n'].a", "['n'].b"]
    assert [v for _, v in pairs] == [1, 2, 3, 4] and spec == pytree.tree_structure(tree)
    for kp, v in pytree.tree_leaves_with_path(tree):
        assert pytree.key_get(tree, kp) == v
    assert pytree.tree_map_with_path(lambda kp, x: pytree.keystr(kp), (1, {"k": 2})) == ("[0]", {"k": "[1]['k']"})


def test_register_pytree_node():
    class Point:
        def __init__(self, x, y):
            self.x, self.y = x, y

    pytree.register_pytree_node(Point, lambda p: ([p.x, p.y], "pt"), lambda v, c: Point(*v),
                                serialized_type_name="test.Point",
                                flatten_with_keys_fn=lambda p: ([(pytree.GetAttrKey("x"), p.x),
                                                                 (pytree.GetAttrKey("y"), p.y)], "pt"))
    try:
        leaves, spec = pytree.tree_flatten([Point(1, (2, 3))])
        assert leaves == [1, 2, 3]
        assert repr(spec) == \
            "TreeSpec(list, None, [TreeSpec(Point, pt, [*,\n    TreeSpec(tuple, None, [*,\n      *])])])"
        back = pytree.tree_unflatten([10, 20, 30], spec)
        assert isinstance(back[0], Point) and (back[0].x, back[0].y) == (10, (20, 30))
        assert [pytree.keystr(k) for k, _ in pytree.tree_leaves_with_path(Point(1, 2))] == [".x", ".y"]
        with pytest.raises(ValueError, match="is already registered as pytree node"):
            pytree.register_pytree_node(Point, lambda p: ([], None), lambda v, c: None)
        assert pytree.treespec_loads(pytree.treespec_dumps(spec)) == spec
    finally:
        pytree._deregister_pytree_node(Point)
    assert pytree.tree_leaves([Point(1, 2)])[0].x == 1  # a leaf again


def test_register_dataclass():
    @dataclasses.dataclass
    class Batch:
        x: int
        y: list

    pytree.register_dataclass(Batch)
    try:
        assert pytree.tree_leaves(Batch(1, [2, 3])) == [1, 2, 3]
        assert pytree.tree_map(lambda v: v + 1, Batch(1, [2])) == Batch(2, [3])
    finally:
        pytree._deregister_pytree_node(Batch)


def test_treespec_dumps_loads():
    spec = pytree.tree_structure({"a": (1, [2]), "o": collections.OrderedDict(z=1),
                                  "d": collections.defaultdict(list, {"k": 1}), "q": collections.deque([1], maxlen=3)})
    text = pytree.treespec_dumps(spec)
    protocol, schema = json.loads(text)
    assert protocol == 1 and schema["type"] == "builtins.dict" and schema["context"] == '["a", "o", "d", "q"]'
    assert pytree.treespec_loads(text) == spec
    with pytest.raises(ValueError, match=r"Unknown protocol 7. Available protocols: \[1\]"):
        pytree.treespec_dumps(spec, protocol=7)
    with pytest.raises(NotImplementedError):
        pytree.treespec_dumps(pytree.tree_structure(NT(1, 2)))


def test_flatten_up_to():
    assert pytree.tree_structure([1, 2]).flatten_up_to([[1, 2], 3]) == [[1, 2], 3]


def test_flatten_up_to_dict_types_and_deque_maxlen():
    od = collections.OrderedDict(b=1, a=2)
    # dict, OrderedDict and defaultdict line up with each other by key, in the spec's key order
    assert pytree.tree_structure({"a": 0, "b": 0}).flatten_up_to(od) == [2, 1]
    assert pytree.tree_map(lambda x, y: (x, y), od, {"a": 3, "b": 4}) == collections.OrderedDict(b=(1, 4), a=(2, 3))
    assert pytree.tree_map(lambda x, y: x + y, collections.defaultdict(int, a=1), {"a": 2}) == {"a": 3}
    assert pytree.tree_structure(collections.deque([0], maxlen=1)).flatten_up_to(collections.deque([5])) == [5]


@pytest.mark.parametrize("spec_tree, tree, message", [
    ({"a": 1}, {"a": 1, "b": 2}, "Node arity mismatch; expected 1, but got 2."),
    ({"a": 1}, {"b": 2}, "Node keys mismatch; missing key(s): {'a'}; extra key(s): {'b'}."),
    (NT(1, 2), (1, 2), "Node type mismatch; expected <function namedtuple at"),
    (NT(1, 2), collections.namedtuple("Other", "a b")(1, 2),
     "Node context mismatch for node type <function namedtuple at"),
    (tinytorch.Size([1]), (1,), "Type mismatch; expected <class 'tinytorch._tensor.Size'>, but got <class 'tuple'>."),
])
def test_flatten_up_to_errors(spec_tree, tree, message):
    with pytest.raises(ValueError) as e:
        pytree.tree_structure(spec_tree).flatten_up_to(tree)
    assert str(e.value).startswith(message)


def test_broadcast_to_and_flatten():
    spec = pytree.tree_structure(({"a": 1, "b": (2, 3)}, [4], 5))
    assert pytree._broadcast_to_and_flatten(0, spec) == [0, 0, 0, 0, 0]
    assert pytree._broadcast_to_and_flatten(({"a": 1, "b": None}, 2, 3), spec) == [1, None, None, 2, 3]
    # a leaf of the prefix (None included) stands for the whole subtree below it
    assert pytree._broadcast_to_and_flatten((None, [7], 8), spec) == [None, None, None, 7, 8]
    # the prefix's dict key order decides the order, as in PyTorch
    assert pytree._broadcast_to_and_flatten(({"b": 1, "a": 2}, 3, 4), spec) == [1, 1, 2, 3, 4]
    assert pytree._broadcast_to_and_flatten([0], pytree.tree_structure([[1, 2]]), is_leaf=None) == [0, 0]
    for not_a_prefix in [(0, 1), ({"a": 1}, 2, 3), ({"a": 1, "b": (2,)}, 3, 4), (0, (4,), 5), [0, 1, 2]]:
        assert pytree._broadcast_to_and_flatten(not_a_prefix, spec) is None
    # is_leaf marks prefix subtrees that broadcast whole
    assert pytree._broadcast_to_and_flatten(([1, 2], [3], 4), spec,
                                            is_leaf=lambda x: isinstance(x, list) and len(x) == 2) == \
        [[1, 2]] * 3 + [3, 4]


def test_treespec_builders():
    leaf = pytree.treespec_leaf()
    assert pytree.treespec_tuple([leaf, leaf]) == pytree.tree_structure((1, 2))
    assert pytree.treespec_dict({"a": leaf}) == pytree.tree_structure({"a": 1})


# ---------------------------------------------------------------- parity with PyTorch

def _parity_trees(torch_mod):
    return [
        _nested(),
        (1, [2, (3, {"z": 4, "a": 5})], None),
        [NT(1, [2]), collections.OrderedDict(b=1, a=2), {}],
        {"shape": torch_mod.Size([2, 3]), "v": [1.5, "s"]},
    ]


def test_parity_with_torch_leaves_and_specs():
    torch = pytest.importorskip("torch")
    import torch.utils._pytree as tp
    for mine, theirs in zip(_parity_trees(tinytorch), _parity_trees(torch)):
        my_leaves, my_spec = pytree.tree_flatten(mine)
        th_leaves, th_spec = tp.tree_flatten(theirs)
        assert my_leaves == th_leaves
        assert repr(my_spec) == repr(th_spec)
        assert (my_spec.num_leaves, my_spec.num_nodes, my_spec.num_children) == \
            (th_spec.num_leaves, th_spec.num_nodes, th_spec.num_children)
        if my_spec.type is not dict or "shape" not in my_spec.context:  # torch.Size prints its *s differently
            assert pytree.treespec_pprint(my_spec) == tp.treespec_pprint(th_spec)
        assert [pytree.keystr(k) for k, _ in pytree.tree_leaves_with_path(mine)] == \
            [tp.keystr(k) for k, _ in tp.tree_leaves_with_path(theirs)]


def test_parity_with_torch_serialization():
    pytest.importorskip("torch")
    import torch.utils._pytree as tp
    tree = {"a": (1, [2]), "o": collections.OrderedDict(z=1), "d": collections.defaultdict(list, {"k": 1}),
            "q": collections.deque([1], maxlen=3)}
    mine = pytree.treespec_dumps(pytree.tree_structure(tree))
    assert mine == tp.treespec_dumps(tp.tree_structure(tree))
    assert repr(tp.treespec_loads(mine)) == repr(pytree.tree_structure(tree))


def test_parity_with_torch_broadcast_and_flatten_up_to():
    torch = pytest.importorskip("torch")
    import torch.utils._pytree as tp
    full = ({"a": 1, "b": (2, 3)}, [4], collections.OrderedDict(x=5), collections.deque([6], maxlen=2), NT(7, 8))
    prefixes = [0, None, (0, 1, 2, 3, 4), ({"b": 1, "a": None}, [2], {"x": 3}, collections.deque([4]), NT(5, 6)),
                ({"a": 1}, 2, 3, 4, 5), (0, (1,), 2, 3, 4), (0, 1, 2, 3, (4, 5)), [0, 1, 2, 3, 4]]
    for prefix in prefixes:
        assert pytree._broadcast_to_and_flatten(prefix, pytree.tree_structure(full)) == \
            tp._broadcast_to_and_flatten(prefix, tp.tree_structure(full)), prefix

    def error(lib, spec_tree, tree):
        with pytest.raises(ValueError) as e:
            lib.tree_structure(spec_tree).flatten_up_to(tree)
        return str(e.value)

    other = collections.namedtuple("Other", "a b")
    for spec_tree, tree in [((1, 2), [1, 2]), ((1, 2), (1,)), ({"a": 1}, {"b": 1}), ({"a": 1, "b": 2}, {"a": 1}),
                            ({"a": 1}, {"a": 1, "b": 2}), (NT(1, 2), other(1, 2)), (NT(1, 2), (1, 2))]:
        assert error(pytree, spec_tree, tree) == error(tp, spec_tree, tree)
