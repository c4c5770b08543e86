"""RemovableHandle: what register_*hook returns; remove() takes the hook out again."""
from __future__ import annotations

import itertools

_ids = itertools.count()


class RemovableHandle:
    """Removes one hook from the dict it was registered in (and its flags from `extra_dict`)."""

    def __init__(self, hooks_dict: dict, *, extra_dict: dict | list | None = None) -> None:
        self.hooks_dict = hooks_dict
        self.id = next(_ids)
        # Flag dicts keyed by the same id (with_kwargs, always_call) must forget the hook too.
        if extra_dict is None:
            self.extra_dicts = ()
        elif isinstance(extra_dict, dict):
            self.extra_dicts = (extra_dict,)
        else:
            self.extra_dicts = tuple(extra_dict)

    def remove(self) -> None:
        self.hooks_dict.pop(self.id, None)
        for d in self.extra_dicts:
            d.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def add_hook(hooks_dict: dict, hook) -> RemovableHandle:
    """Register hook in hooks_dict (run in registration order); the handle takes it out again."""
    handle = RemovableHandle(hooks_dict)
    hooks_dict[handle.id] = hook
    return handle
