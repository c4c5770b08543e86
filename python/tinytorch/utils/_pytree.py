"""torch.utils._pytree: flatten nested containers (tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque,
torch.Size, torch.return_types, registered classes) into a list of leaves and a TreeSpec that rebuilds them.

Matches PyTorch's Python implementation: dict keys keep insertion order (two dicts with the same keys in another
order have different specs), None is a leaf, a namedtuple's spec has type `namedtuple` and its class as context,
and `treespec_dumps` writes PyTorch's JSON (protocol 1), so specs serialized by either library load in the other.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import threading
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, Callable, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Type, Union

__all__ = ["PyTree", "Context", "FlattenFn", "UnflattenFn", "DumpableContext", "ToDumpableContextFn",
           "FromDumpableContextFn", "TreeSpec", "LeafSpec", "keystr", "key_get", "register_pytree_node",
           "tree_is_leaf", "tree_flatten", "tree_flatten_with_path", "tree_unflatten", "tree_iter", "tree_leaves",
           "tree_leaves_with_path", "tree_structure", "tree_map", "tree_map_with_path", "tree_map_", "tree_map_only",
           "tree_map_only_", "tree_all", "tree_any", "tree_all_only", "tree_any_only", "treespec_dumps",
           "treespec_loads", "treespec_pprint", "is_namedtuple", "is_namedtuple_class", "is_namedtuple_instance",
           "is_structseq", "is_structseq_class", "is_structseq_instance"]

PyTree = Any
Context = Any
DumpableContext = Any
FlattenFn = Callable[[PyTree], Tuple[List[Any], Context]]
UnflattenFn = Callable[[Iterable[Any], Context], PyTree]
ToDumpableContextFn = Callable[[Context], DumpableContext]
FromDumpableContextFn = Callable[[DumpableContext], Context]
KeyEntry = Any
KeyPath = Tuple[KeyEntry, ...]
FlattenWithKeysFn = Callable[[PyTree], Tuple[List[Tuple[KeyEntry, Any]], Context]]

DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL = 1
_SUPPORTED_PROTOCOLS = {1}
NO_SERIALIZED_TYPE_NAME_FOUND = "NO_SERIALIZED_TYPE_NAME_FOUND"


class NodeDef(NamedTuple):
    """How one container type is flattened and rebuilt."""

    type: Type[Any]
    flatten_fn: FlattenFn
    unflatten_fn: UnflattenFn
    flatten_with_keys_fn: Optional[FlattenWithKeysFn]


class _SerializeNodeDef(NamedTuple):
    """How one container type's spec is written by treespec_dumps."""

    typ: Type[Any]
    serialized_type_name: str
    to_dumpable_context: Optional[ToDumpableContextFn]
    from_dumpable_context: Optional[FromDumpableContextFn]


SUPPORTED_NODES: Dict[Any, NodeDef] = {}
SUPPORTED_SERIALIZED_TYPES: Dict[Any, _SerializeNodeDef] = {}
SERIALIZED_TYPE_TO_PYTHON_TYPE: Dict[str, Any] = {}
_NODE_REGISTRY_LOCK = threading.Lock()


# ---------------------------------------------------------------- key paths

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The position of a child in a sequence node (prints as `[idx]`)."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Any) -> Any:
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    """The key of a child in a mapping node (prints as `[key]`)."""

    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Any) -> Any:
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The attribute name of a child (namedtuple field; prints as `.name`)."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


def keystr(kp: KeyPath) -> str:
    """The key path as the Python accessor string it stands for, e.g. `['a'][0].b`."""
    return "".join(str(k) for k in kp)


def key_get(obj: Any, kp: KeyPath) -> Any:
    """The element of `obj` that the key path `kp` leads to."""
    for k in kp:
        obj = k.get(obj)
    return obj


# ---------------------------------------------------------------- registration

def _register(cls: Any, flatten_fn: FlattenFn, unflatten_fn: UnflattenFn, serialized_type_name: Optional[str],
              to_dumpable_context: Optional[ToDumpableContextFn],
              from_dumpable_context: Optional[FromDumpableContextFn],
              flatten_with_keys_fn: Optional[FlattenWithKeysFn]) -> None:
    with _NODE_REGISTRY_LOCK:
        if cls in SUPPORTED_NODES:
            raise ValueError(f"{cls} is already registered as pytree node.")
        if (to_dumpable_context is None) != (from_dumpable_context is None):
            raise ValueError(f"Both to_dumpable_context and from_dumpable_context for {cls} must be None or "
                             "registered.")
        SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)
        name = NO_SERIALIZED_TYPE_NAME_FOUND if serialized_type_name is None else serialized_type_name
        SUPPORTED_SERIALIZED_TYPES[cls] = _SerializeNodeDef(cls, name, to_dumpable_context, from_dumpable_context)
        SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls


def register_pytree_node(cls: Type[Any], flatten_fn: FlattenFn, unflatten_fn: UnflattenFn, *,
                         serialized_type_name: Optional[str] = None,
                         to_dumpable_context: Optional[ToDumpableContextFn] = None,
                         from_dumpable_context: Optional[FromDumpableContextFn] = None,
                         flatten_with_keys_fn: Optional[FlattenWithKeysFn] = None) -> None:
    """Make `cls` a container node: flatten_fn(obj) -> (children, context), unflatten_fn(children, context) -> obj.
    serialized_type_name (and the dumpable-context pair) let treespec_dumps write specs holding it."""
    _register(cls, flatten_fn, unflatten_fn, serialized_type_name, to_dumpable_context, from_dumpable_context,
              flatten_with_keys_fn)


def _register_pytree_node(cls: Type[Any], flatten_fn: FlattenFn, unflatten_fn: UnflattenFn,
                          to_str_fn: Any = None, maybe_from_str_fn: Any = None, *,
                          serialized_type_name: Optional[str] = None,
                          to_dumpable_context: Optional[ToDumpableContextFn] = None,
                          from_dumpable_context: Optional[FromDumpableContextFn] = None,
                          flatten_with_keys_fn: Optional[FlattenWithKeysFn] = None) -> None:
    """PyTorch's older spelling of register_pytree_node (still used by libraries); the str functions are unused."""
    _register(cls, flatten_fn, unflatten_fn, serialized_type_name, to_dumpable_context, from_dumpable_context,
              flatten_with_keys_fn)


def _deregister_pytree_node(cls: Type[Any]) -> None:
    """Undo register_pytree_node(cls)."""
    with _NODE_REGISTRY_LOCK:
        del SUPPORTED_NODES[cls]
        node_def = SUPPORTED_SERIALIZED_TYPES.pop(cls)
        SERIALIZED_TYPE_TO_PYTHON_TYPE.pop(node_def.serialized_type_name, None)


def register_dataclass(cls: Type[Any], *, field_names: Optional[List[str]] = None,
                       drop_field_names: Optional[List[str]] = None,
                       serialized_type_name: Optional[str] = None) -> None:
    """Make a dataclass a node whose children are its fields (in declaration order, less drop_field_names)."""
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"register_dataclass expects a dataclass type, got {cls}")
    dropped = set(drop_field_names or ())
    names = list(field_names) if field_names is not None else [f.name for f in dataclasses.fields(cls)
                                                                if f.init and f.name not in dropped]

    def flatten(obj: Any) -> Tuple[List[Any], Context]:
        return [getattr(obj, n) for n in names], names

    def unflatten(values: Iterable[Any], context: Context) -> Any:
        return cls(**dict(zip(context, values)))

    def flatten_with_keys(obj: Any) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
        return [(GetAttrKey(n), getattr(obj, n)) for n in names], names

    _register(cls, flatten, unflatten, serialized_type_name, None, None, flatten_with_keys)


# ---------------------------------------------------------------- namedtuple / structseq

def is_namedtuple_class(cls: type) -> bool:
    """True for a class made by collections.namedtuple or typing.NamedTuple."""
    return (isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)
            and all(type(f) is str for f in cls._fields) and callable(getattr(cls, "_make", None))
            and callable(getattr(cls, "_asdict", None)))


def is_namedtuple_instance(obj: object) -> bool:
    """True for an instance of a namedtuple class."""
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj: Union[object, type]) -> bool:
    """True for a namedtuple class or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: type) -> bool:
    """True for a torch.return_types class (tinytorch's are namedtuples in the tinytorch.return_types module)."""
    return is_namedtuple_class(cls) and cls.__module__ == "tinytorch.return_types"


def is_structseq_instance(obj: object) -> bool:
    """True for an instance of a torch.return_types class."""
    return is_structseq_class(type(obj))


def is_structseq(obj: Union[object, type]) -> bool:
    """True for a torch.return_types class or instance."""
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def structseq(*args: Any, **kwargs: Any) -> Any:
    """Stands for every torch.return_types class as a registry key, as `namedtuple` does for namedtuples."""
    raise TypeError("structseq is a pytree registry key, not a constructor")


# ---------------------------------------------------------------- the built-in nodes

def _tuple_flatten(d: tuple) -> Tuple[List[Any], Context]:
    return list(d), None


def _tuple_unflatten(values: Iterable[Any], context: Context) -> tuple:
    return tuple(values)


def _tuple_flatten_with_keys(d: tuple) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _list_flatten(d: list) -> Tuple[List[Any], Context]:
    return list(d), None


def _list_unflatten(values: Iterable[Any], context: Context) -> list:
    return list(values)


def _dict_flatten(d: dict) -> Tuple[List[Any], Context]:
    return list(d.values()), list(d.keys())


def _dict_unflatten(values: Iterable[Any], context: Context) -> dict:
    return dict(zip(context, values))


def _dict_flatten_with_keys(d: dict) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
    return [(MappingKey(k), v) for k, v in d.items()], list(d.keys())


def _namedtuple_flatten(d: tuple) -> Tuple[List[Any], Context]:
    return list(d), type(d)


def _namedtuple_unflatten(values: Iterable[Any], context: Context) -> tuple:
    return context(*values)


def _namedtuple_flatten_with_keys(d: tuple) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
    return [(GetAttrKey(f), v) for f, v in zip(d._fields, d)], type(d)


def _namedtuple_serialize(context: Context) -> DumpableContext:
    raise NotImplementedError(f"Can't serialize TreeSpec of namedtuple class {context!r}: tinytorch keeps no "
                              "registry of serialized namedtuple names")


def _namedtuple_deserialize(dumpable_context: DumpableContext) -> Context:
    raise NotImplementedError(f"Can't deserialize the namedtuple class {dumpable_context!r}: tinytorch keeps no "
                              "registry of serialized namedtuple names")


def _structseq_unflatten(values: Iterable[Any], context: Context) -> tuple:
    return context(*values)


def _ordereddict_unflatten(values: Iterable[Any], context: Context) -> OrderedDict:
    return OrderedDict(zip(context, values))


def _defaultdict_flatten(d: defaultdict) -> Tuple[List[Any], Context]:
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values: Iterable[Any], context: Context) -> defaultdict:
    default_factory, keys = context
    return defaultdict(default_factory, zip(keys, values))


def _defaultdict_flatten_with_keys(d: defaultdict) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
    values, context = _defaultdict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context[1], values)], context


def _defaultdict_serialize(context: Context) -> DumpableContext:
    default_factory, keys = context
    return {"default_factory_module": default_factory.__module__,
            "default_factory_name": default_factory.__qualname__, "dict_context": keys}


def _defaultdict_deserialize(dumpable_context: DumpableContext) -> Context:
    module = importlib.import_module(dumpable_context["default_factory_module"])
    return [getattr(module, dumpable_context["default_factory_name"]), dumpable_context["dict_context"]]


def _deque_flatten(d: deque) -> Tuple[List[Any], Context]:
    return list(d), d.maxlen


def _deque_unflatten(values: Iterable[Any], context: Context) -> deque:
    return deque(values, maxlen=context)


def _size_unflatten(values: Iterable[Any], context: Context) -> Any:
    from tinytorch._tensor import Size
    return Size(values)


def _register_builtins() -> None:
    from tinytorch._tensor import Size
    _register(tuple, _tuple_flatten, _tuple_unflatten, "builtins.tuple", None, None, _tuple_flatten_with_keys)
    _register(list, _list_flatten, _list_unflatten, "builtins.list", None, None, _tuple_flatten_with_keys)
    _register(dict, _dict_flatten, _dict_unflatten, "builtins.dict", None, None, _dict_flatten_with_keys)
    _register(namedtuple, _namedtuple_flatten, _namedtuple_unflatten, "collections.namedtuple",
              _namedtuple_serialize, _namedtuple_deserialize, _namedtuple_flatten_with_keys)
    _register(OrderedDict, _dict_flatten, _ordereddict_unflatten, "collections.OrderedDict", None, None,
              _dict_flatten_with_keys)
    _register(defaultdict, _defaultdict_flatten, _defaultdict_unflatten, "collections.defaultdict",
              _defaultdict_serialize, _defaultdict_deserialize, _defaultdict_flatten_with_keys)
    _register(deque, _deque_flatten, _deque_unflatten, "collections.deque", None, None, _tuple_flatten_with_keys)
    _register(Size, _tuple_flatten, _size_unflatten, "torch.Size", None, None, _tuple_flatten_with_keys)


_register_builtins()
STANDARD_DICT_TYPES = frozenset({dict, OrderedDict, defaultdict})
BUILTIN_TYPES = frozenset({tuple, list, dict, namedtuple, OrderedDict, defaultdict, deque})


def _get_node_type(tree: Any) -> Any:
    cls = type(tree)
    if cls in SUPPORTED_NODES:
        return cls
    if is_namedtuple_class(cls):
        return cls if cls.__module__ == "tinytorch.return_types" else namedtuple
    return cls


def _node_def(tree: Any) -> Optional[NodeDef]:
    """The NodeDef that flattens `tree`, or None for a leaf; a torch.return_types class is registered on first
    sight, as PyTorch registers all of them up front."""
    cls = type(tree)
    node = SUPPORTED_NODES.get(cls)
    if node is not None:
        return node
    if is_namedtuple_class(cls):
        if cls.__module__ == "tinytorch.return_types":
            try:
                _register(cls, _namedtuple_flatten_structseq, _structseq_unflatten_cls(cls),
                          f"torch.return_types.{cls.__name__}", None, None, _namedtuple_flatten_with_keys_structseq)
            except ValueError:  # another thread registered it first
                pass
            return SUPPORTED_NODES[cls]
        return SUPPORTED_NODES[namedtuple]
    return None


def _namedtuple_flatten_structseq(d: tuple) -> Tuple[List[Any], Context]:
    return list(d), None


def _namedtuple_flatten_with_keys_structseq(d: tuple) -> Tuple[List[Tuple[KeyEntry, Any]], Context]:
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _structseq_unflatten_cls(cls: type) -> UnflattenFn:
    def unflatten(values: Iterable[Any], context: Context) -> tuple:
        return cls(*values)
    return unflatten


def _is_leaf(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    return (is_leaf is not None and is_leaf(tree)) or _node_def(tree) is None


def tree_is_leaf(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    """True when `tree` is a leaf: not a registered container type (or is_leaf(tree) says so). None is a leaf."""
    return _is_leaf(tree, is_leaf)


# ---------------------------------------------------------------- TreeSpec

class TreeSpec:
    """The structure of a pytree: a node's type, its context (dict keys, namedtuple class, ...) and the specs of its
    children. A leaf's spec has type None and no children (and prints as `*`)."""

    def __init__(self, type: Any, context: Context, children_specs: List["TreeSpec"]) -> None:  # noqa: A002
        self.type = type
        self._context = context
        self._children = list(children_specs)
        self.num_children = len(self._children)
        if type is None:
            self.num_nodes, self.num_leaves = 1, 1
        else:
            self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
            self.num_leaves = sum(c.num_leaves for c in self._children)

    @property
    def context(self) -> Context:
        return self._context

    @property
    def children_specs(self) -> List["TreeSpec"]:
        return self._children

    def child(self, index: int) -> "TreeSpec":
        """The spec of the index-th child."""
        return self._children[index]

    def children(self) -> List["TreeSpec"]:
        """The specs of all children (a new list)."""
        return list(self._children)

    def is_leaf(self) -> bool:
        return self.num_nodes == 1 and self.num_leaves == 1

    def __repr__(self, indent: int = 0) -> str:
        if self.type is None:
            return "*"
        body = ""
        if self._children:
            indent += 2
            sep = ",\n" + " " * indent
            body = sep.join(c.__repr__(indent) for c in self._children)
        return f"TreeSpec({self.type.__name__}, {self._context}, [{body}])"

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type == other.type and self._context == other._context
                and self._children == other._children)

    def __hash__(self) -> int:
        return hash((self.type, self.num_nodes, self.num_leaves))

    def _flatten_up_to(self, tree: PyTree, subtrees: List[PyTree]) -> None:
        if self.type is None:
            subtrees.append(tree)
            return
        node_type = _get_node_type(tree)
        if self.type not in BUILTIN_TYPES:
            if node_type is not self.type:
                raise ValueError(f"Type mismatch; expected {self.type!r}, but got {node_type!r}.")
            children, context = SUPPORTED_NODES[node_type].flatten_fn(tree)
            if len(children) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(children)}.")
            if context != self._context:
                raise ValueError(f"Node context mismatch for custom node type {self.type!r}.")
        else:
            # dict, OrderedDict and defaultdict stand in for each other, matched by key
            both_dicts = self.type in STANDARD_DICT_TYPES and node_type in STANDARD_DICT_TYPES
            if not both_dicts and node_type is not self.type:
                raise ValueError(f"Node type mismatch; expected {self.type!r}, but got {node_type!r}.")
            if len(tree) != self.num_children:
                raise ValueError(f"Node arity mismatch; expected {self.num_children}, but got {len(tree)}.")
            if both_dicts:
                keys = self._context[1] if self.type is defaultdict else self._context
                expected, got = set(keys), set(tree)
                if expected != got:
                    missing = f"; missing key(s): {expected - got}" if expected - got else ""
                    extra = f"; extra key(s): {got - expected}" if got - expected else ""
                    raise ValueError(f"Node keys mismatch{missing}{extra}.")
                children = [tree[k] for k in keys]
            else:
                children, context = SUPPORTED_NODES[node_type].flatten_fn(tree)
                # a deque's maxlen is not part of its structure here
                if node_type is not deque and context != self._context:
                    raise ValueError(f"Node context mismatch for node type {self.type!r}; expected "
                                     f"{self._context!r}, but got {context!r}.")
        for child, spec in zip(children, self._children):
            spec._flatten_up_to(child, subtrees)

    def flatten_up_to(self, tree: PyTree) -> List[PyTree]:
        """The subtrees of `tree` found where this spec has leaves (tree must have this spec's structure above)."""
        subtrees: List[PyTree] = []
        self._flatten_up_to(tree, subtrees)
        return subtrees

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        """Rebuild the pytree this spec describes from `leaves` (in flatten order)."""
        if not isinstance(leaves, (list, tuple)):
            leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to "
                             f"a pytree that holds {self.num_leaves} items ({self}).")
        return self._build(iter(leaves))

    def _build(self, leaves: Iterator[Any]) -> PyTree:
        if self.type is None:
            return next(leaves)
        children = [c._build(leaves) for c in self._children]
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self._context)


class LeafSpec(TreeSpec):
    """The spec of a leaf (prints as `*`)."""

    def __init__(self) -> None:
        super().__init__(None, None, [])


_LEAF_SPEC = LeafSpec()
PyTreeSpec = TreeSpec


def treespec_leaf() -> LeafSpec:
    """The spec of a leaf."""
    return _LEAF_SPEC


def treespec_tuple(iterable: Iterable[TreeSpec] = (), /) -> TreeSpec:
    """A tuple spec with the given child specs."""
    children = list(iterable)
    if any(not isinstance(c, TreeSpec) for c in children):
        raise ValueError(f"Expected a tuple of TreeSpec values, got: {children!r}.")
    return TreeSpec(tuple, None, children)


def treespec_dict(mapping: Any = (), /, **kwargs: TreeSpec) -> TreeSpec:
    """A dict spec with the given keys and child specs."""
    d = dict(mapping, **kwargs)
    if any(not isinstance(c, TreeSpec) for c in d.values()):
        raise ValueError(f"Expected a dictionary of TreeSpec values, got: {d!r}.")
    return TreeSpec(dict, list(d.keys()), list(d.values()))


# ---------------------------------------------------------------- flatten / unflatten

def _flatten(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]], leaves: List[Any]) -> TreeSpec:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF_SPEC
    node = _node_def(tree)
    if node is None:
        leaves.append(tree)
        return _LEAF_SPEC
    children, context = node.flatten_fn(tree)
    return TreeSpec(node.type, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_flatten(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> Tuple[List[Any], TreeSpec]:
    """The leaves of `tree` (depth first, children in container order) and the TreeSpec that rebuilds it."""
    leaves: List[Any] = []
    spec = _flatten(tree, is_leaf, leaves)
    return leaves, spec


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree:
    """Rebuild a pytree from its leaves and the TreeSpec tree_flatten gave."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"Expected `treespec` to be an instance of PyTreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> Iterator[Any]:
    """Yield the leaves of `tree` in flatten order, without building a spec."""
    if is_leaf is not None and is_leaf(tree):
        yield tree
        return
    node = _node_def(tree)
    if node is None:
        yield tree
        return
    for child in node.flatten_fn(tree)[0]:
        yield from tree_iter(child, is_leaf)


def tree_leaves(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> List[Any]:
    """The leaves of `tree` in flatten order."""
    return list(tree_iter(tree, is_leaf))


def arg_tree_leaves(*args: PyTree, **kwargs: PyTree) -> List[Any]:
    """The leaves of (args, kwargs), as tree_leaves((args, kwargs)) gives them."""
    leaves: List[Any] = []
    for a in args:
        leaves.extend(tree_iter(a))
    for a in kwargs.values():
        leaves.extend(tree_iter(a))
    return leaves


def tree_structure(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> TreeSpec:
    """The TreeSpec of `tree`."""
    return tree_flatten(tree, is_leaf)[1]


def _broadcast(spec: TreeSpec, rests: Tuple[PyTree, ...]) -> List[List[Any]]:
    return [spec.flatten_up_to(r) for r in rests]


def _broadcast_to_and_flatten(tree: PyTree, treespec: TreeSpec,
                              is_leaf: Optional[Callable[[PyTree], bool]] = None) -> Optional[List[Any]]:
    """One value per leaf of `treespec`: each leaf of the prefix `tree` repeated over the subtree it stands for
    (torch.func's vmap broadcasts in_dims/out_dims this way); None when `tree` is not a prefix of `treespec`."""
    full_tree = treespec.unflatten([0] * treespec.num_leaves)
    prefix_leaves, prefix_spec = tree_flatten(tree, is_leaf)
    try:
        subtrees = prefix_spec.flatten_up_to(full_tree)
    except ValueError:
        return None
    result: List[Any] = []
    for value, subtree in zip(prefix_leaves, subtrees):
        result.extend([value] * tree_structure(subtree, is_leaf).num_leaves)
    return result


def tree_map(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
             is_leaf: Optional[Callable[[PyTree], bool]] = None) -> PyTree:
    """A pytree of `tree`'s structure holding func(leaf, *corresponding subtrees of rests)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = _broadcast(spec, rests)
    return spec.unflatten([func(*xs) for xs in zip(leaves, *others)])


def tree_map_(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
              is_leaf: Optional[Callable[[PyTree], bool]] = None) -> PyTree:
    """Call func on every leaf (with the matching subtrees of rests) for its side effects; returns `tree`."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = _broadcast(spec, rests)
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _type_pred(type_or_types_or_pred: Any) -> Callable[[Any], bool]:
    if isinstance(type_or_types_or_pred, (type, tuple)) or type(type_or_types_or_pred).__name__ == "UnionType":
        return lambda x: isinstance(x, type_or_types_or_pred)
    if callable(type_or_types_or_pred):
        return type_or_types_or_pred
    raise TypeError("Argument must be a type, a tuple of types, or a callable.")


def map_only(type_or_types_or_pred: Any, /) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Decorator: the wrapped function applies to arguments matching the type(s) or predicate, others pass through."""
    pred = _type_pred(type_or_types_or_pred)

    def wrapper(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def wrapped(x: Any) -> Any:
            return func(x) if pred(x) else x
        wrapped.__wrapped__ = func
        return wrapped
    return wrapper


def tree_map_only(type_or_types_or_pred: Any, /, func: Callable[[Any], Any], tree: PyTree,
                  is_leaf: Optional[Callable[[PyTree], bool]] = None) -> PyTree:
    """tree_map that applies func only to leaves of the given type(s) (or passing the predicate)."""
    return tree_map(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types_or_pred: Any, /, func: Callable[[Any], Any], tree: PyTree,
                   is_leaf: Optional[Callable[[PyTree], bool]] = None) -> PyTree:
    """tree_map_ that calls func only on leaves of the given type(s) (or passing the predicate)."""
    return tree_map_(map_only(type_or_types_or_pred)(func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    """True when pred holds for every leaf."""
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    """True when pred holds for some leaf."""
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types: Any, /, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    """True when pred holds for every leaf of the given type(s); other leaves are skipped."""
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types: Any, /, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Optional[Callable[[PyTree], bool]] = None) -> bool:
    """True when pred holds for some leaf of the given type(s)."""
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


# ---------------------------------------------------------------- key paths of leaves

def _flatten_with_path(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]], path: KeyPath,
                       out: List[Tuple[KeyPath, Any]]) -> None:
    if is_leaf is not None and is_leaf(tree):
        out.append((path, tree))
        return
    node = _node_def(tree)
    if node is None:
        out.append((path, tree))
        return
    if node.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {node.type}. Please pass a "
                         "flatten_with_keys_fn argument to register_pytree_node.")
    for key, child in node.flatten_with_keys_fn(tree)[0]:
        _flatten_with_path(child, is_leaf, path + (key,), out)


def tree_flatten_with_path(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None
                           ) -> Tuple[List[Tuple[KeyPath, Any]], TreeSpec]:
    """Like tree_flatten, with each leaf paired with the key path (SequenceKey, MappingKey, GetAttrKey) to it."""
    out: List[Tuple[KeyPath, Any]] = []
    _flatten_with_path(tree, is_leaf, (), out)
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree: PyTree, is_leaf: Optional[Callable[[PyTree], bool]] = None
                          ) -> List[Tuple[KeyPath, Any]]:
    """The (key path, leaf) pairs of `tree`."""
    out: List[Tuple[KeyPath, Any]] = []
    _flatten_with_path(tree, is_leaf, (), out)
    return out


def tree_map_with_path(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
                       is_leaf: Optional[Callable[[PyTree], bool]] = None) -> PyTree:
    """tree_map where func also receives each leaf's key path first."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = _broadcast(spec, rests)
    return spec.unflatten([func(kp, x, *xs) for (kp, x), *xs in zip(pairs, *others)])


# ---------------------------------------------------------------- serialization

def _treespec_to_json(spec: TreeSpec) -> Dict[str, Any]:
    if spec.type is None:
        return {"type": None, "context": None, "children_spec": []}
    node_def = SUPPORTED_SERIALIZED_TYPES.get(spec.type)
    if node_def is None:
        raise NotImplementedError(f"Serializing {spec.type} in pytree is not registered.")
    if node_def.serialized_type_name == NO_SERIALIZED_TYPE_NAME_FOUND:
        raise NotImplementedError(f"No registered serialization name for {spec.type} found. Please update your "
                                  "register_pytree_node call with a `serialized_type_name` kwarg.")
    if node_def.to_dumpable_context is None:
        try:
            context = json.dumps(spec.context)
        except TypeError as e:
            raise TypeError("Unable to serialize context. Please make the context json dump-able, or register a "
                            "custom serializer using register_pytree_node.") from e
    else:
        context = node_def.to_dumpable_context(spec.context)
    return {"type": node_def.serialized_type_name, "context": context,
            "children_spec": [_treespec_to_json(c) for c in spec.children_specs]}


def _json_to_treespec(obj: Dict[str, Any]) -> TreeSpec:
    if obj["type"] is None and obj["context"] is None and not obj["children_spec"]:
        return _LEAF_SPEC
    name = obj["type"]
    if name not in SERIALIZED_TYPE_TO_PYTHON_TYPE:
        raise NotImplementedError(f"Deserializing {name} in pytree is not registered.")
    typ = SERIALIZED_TYPE_TO_PYTHON_TYPE[name]
    node_def = SUPPORTED_SERIALIZED_TYPES[typ]
    if node_def.from_dumpable_context is None:
        context = json.loads(obj["context"])
    else:
        context = node_def.from_dumpable_context(obj["context"])
    return TreeSpec(typ, context, [_json_to_treespec(c) for c in obj["children_spec"]])


def treespec_dumps(treespec: TreeSpec, protocol: Optional[int] = None) -> str:
    """The spec as PyTorch's JSON string ([protocol, {type, context, children_spec}])."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"treespec_dumps(treespec, protocol): Expected `treespec` to be instance of TreeSpec but "
                        f"got item of type {type(treespec)}.")
    if protocol is None:
        protocol = DEFAULT_TREESPEC_SERIALIZATION_PROTOCOL
    if protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: {sorted(_SUPPORTED_PROTOCOLS)}")
    return json.dumps([protocol, _treespec_to_json(treespec)])


def treespec_loads(serialized: str) -> TreeSpec:
    """The TreeSpec that treespec_dumps wrote."""
    protocol, json_schema = json.loads(serialized)
    if protocol not in _SUPPORTED_PROTOCOLS:
        raise ValueError(f"Unknown protocol {protocol}. Available protocols: {sorted(_SUPPORTED_PROTOCOLS)}")
    return _json_to_treespec(json_schema)


class _Asterisk(str):
    def __new__(cls) -> "_Asterisk":
        return super().__new__(cls, "*")

    def __repr__(self) -> str:
        return "*"


def treespec_pprint(treespec: TreeSpec) -> str:
    """The spec drawn as the container it describes with `*` for each leaf, e.g. `(*, [*, *])`."""
    return repr(treespec.unflatten([_Asterisk()] * treespec.num_leaves))
