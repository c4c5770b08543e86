"""Key-value stores used for rendezvous: the C++ TCPStore and a PrefixStore view."""
from __future__ import annotations

import datetime
from typing import List, Optional, Union

from tinytorch._C import _distributed as _cdist

DistError = _cdist.DistError
DistTimeoutError = _cdist.DistTimeoutError
DistNetworkError = _cdist.DistNetworkError
DistStoreError = _cdist.DistStoreError

default_store_timeout = datetime.timedelta(seconds=300)

Timeout = Union[datetime.timedelta, float, int]


def _seconds(timeout: Optional[Timeout], default: float) -> float:
    """Convert a timedelta or number of seconds to float seconds."""
    if timeout is None:
        return default
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


def _as_bytes(value: Union[str, bytes, bytearray, int]) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, int):
        return str(value).encode()
    raise TypeError(f"store values must be str or bytes, got {type(value).__name__}")


class Store:
    """Common interface of TCPStore and PrefixStore."""


class TCPStore(_cdist.TCPStore, Store):
    """A TCP key-value store; the master hosts a C++ server (one poll() thread), every instance is a client."""

    def __init__(
        self,
        host_name: str,
        port: int,
        world_size: Optional[int] = None,
        is_master: bool = False,
        timeout: Timeout = default_store_timeout,
        wait_for_workers: bool = True,
        multi_tenant: bool = False,
        master_listen_fd: Optional[int] = None,
        use_libuv: bool = True,
    ) -> None:
        """Start the server (is_master) and connect; multi_tenant and use_libuv are accepted for PyTorch
        compatibility and ignored (every master runs its own poll() server)."""
        self._is_master = bool(is_master)
        if not is_master and master_listen_fd is not None:
            raise ValueError("master_listen_fd is only meaningful with is_master=True")
        super().__init__(
            host_name,
            int(port),
            int(world_size) if world_size is not None else -1,
            bool(is_master),
            _seconds(timeout, 300.0),
            bool(wait_for_workers),
            -1 if master_listen_fd is None else int(master_listen_fd),
        )

    @property
    def timeout(self) -> datetime.timedelta:
        """The default timeout of blocking operations."""
        return datetime.timedelta(seconds=self.timeout_seconds)

    def set_timeout(self, timeout: Timeout) -> None:
        """Change the default timeout of blocking operations."""
        self.timeout_seconds = _seconds(timeout, 300.0)

    def set(self, key: str, value: Union[str, bytes]) -> None:  # type: ignore[override]
        """Store `value` under `key`, waking any waiter on it."""
        super().set(key, _as_bytes(value))

    def compare_set(self, key: str, expected_value: Union[str, bytes], desired_value: Union[str, bytes]) -> bytes:  # type: ignore[override]
        """Set `key` to `desired_value` if its value is `expected_value` (or it is missing and expected is empty)."""
        return super().compare_set(key, _as_bytes(expected_value), _as_bytes(desired_value))

    def wait(self, keys: Union[str, List[str]], timeout: Optional[Timeout] = None) -> None:  # type: ignore[override]
        """Block until every key exists, raising DistTimeoutError after `timeout` (default: the store's)."""
        if isinstance(keys, str):
            keys = [keys]
        super().wait(list(keys), _seconds(timeout, self.timeout_seconds))

    def check(self, keys: Union[str, List[str]]) -> bool:  # type: ignore[override]
        """True if every key exists (never blocks)."""
        if isinstance(keys, str):
            keys = [keys]
        return super().check(list(keys))


class PrefixStore(Store):
    """A view of another store where every key is prefixed (one namespace per process group)."""

    def __init__(self, prefix: str, store: Store) -> None:
        self.prefix = prefix
        self.underlying_store = store

    def _k(self, key: str) -> str:
        return f"{self.prefix}/{key}"

    def set(self, key: str, value: Union[str, bytes]) -> None:
        """Store `value` under the prefixed key."""
        self.underlying_store.set(self._k(key), value)

    def get(self, key: str) -> bytes:
        """Wait for and return the prefixed key's value."""
        return self.underlying_store.get(self._k(key))

    def add(self, key: str, amount: int) -> int:
        """Atomically add to the prefixed counter and return the new value."""
        return self.underlying_store.add(self._k(key), amount)

    def compare_set(self, key: str, expected_value: Union[str, bytes], desired_value: Union[str, bytes]) -> bytes:
        """compare_set on the prefixed key."""
        return self.underlying_store.compare_set(self._k(key), expected_value, desired_value)

    def wait(self, keys: Union[str, List[str]], timeout: Optional[Timeout] = None) -> None:
        """Wait for the prefixed keys."""
        if isinstance(keys, str):
            keys = [keys]
        self.underlying_store.wait([self._k(k) for k in keys], timeout)

    def check(self, keys: Union[str, List[str]]) -> bool:
        """Check the prefixed keys."""
        if isinstance(keys, str):
            keys = [keys]
        return self.underlying_store.check([self._k(k) for k in keys])

    def delete_key(self, key: str) -> bool:
        """Delete the prefixed key."""
        return self.underlying_store.delete_key(self._k(key))

    def num_keys(self) -> int:
        """Number of keys in the whole underlying store."""
        return self.underlying_store.num_keys()

    @property
    def timeout_seconds(self) -> float:
        """The underlying store's timeout in seconds."""
        return self.underlying_store.timeout_seconds
