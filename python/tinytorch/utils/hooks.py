"""RemovableHandle: what register_*hook returns; remove() takes the hook out again."""
from __future__ import annotations

import itertools

_ids = itertools.count()


class RemovableHandle:
    """Removes one hook from the dict it was registered in."""

    def __init__(self, hooks_dict: dict) -> None:
        self.hooks_dict = hooks_dict
        self.id = next(_ids)

    def remove(self) -> None:
        self.hooks_dict.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def add_hook(hooks_dict: dict, hook) -> RemovableHandle:
    """Register hook in hooks_dict (run in registration order); the handle takes it out again."""
    handle = RemovableHandle(hooks_dict)
    hooks_dict[handle.id] = hook
    return handle
