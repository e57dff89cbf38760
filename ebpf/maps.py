"""Read a whole BPF hash map into numpy arrays with batch lookups (no Python per entry).

``BPF_MAP_LOOKUP_BATCH`` copies many keys and values per syscall straight into our
buffers; walking the map key by key (bcc's ``items()``) costs two syscalls and two
ctypes objects per entry, which is slow once a host sees tens of thousands of flows.
Kernels or map types without batch support fall back to that walk.
"""

from __future__ import annotations

import ctypes
import errno

import numpy as np

from .errors import EbpfError

__all__ = ["lookup_all"]


def lookup_all(table, key_dtype: np.dtype, value_dtype: np.dtype,  # table: bcc TableBase
               chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) of every entry of bcc ``table`` as arrays of the given dtypes."""
    from bcc.libbcc import lib

    if ctypes.sizeof(table.Key) != key_dtype.itemsize or \
            ctypes.sizeof(table.Leaf) != value_dtype.itemsize:
        raise EbpfError(f"map entry of {ctypes.sizeof(table.Key)}+{ctypes.sizeof(table.Leaf)} "
                        f"B does not match dtypes of {key_dtype.itemsize}+"
                        f"{value_dtype.itemsize} B")
    cap = max(1, int(table.max_entries))
    keys = np.zeros(cap, key_dtype)
    values = np.zeros(cap, value_dtype)
    token = ctypes.c_uint32(0)
    total = 0
    while total < cap:
        count = ctypes.c_uint32(min(chunk, cap - total))
        res = lib.bpf_lookup_batch(
            table.map_fd, ctypes.byref(token) if total else None, ctypes.byref(token),
            keys.ctypes.data + total * key_dtype.itemsize,
            values.ctypes.data + total * value_dtype.itemsize, ctypes.byref(count))
        err = (ctypes.get_errno() or -res) if res != 0 else 0
        total += count.value
        if res != 0:
            if err == errno.ENOENT:
                break                                  # walked the whole map
            if total == 0 and err in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, 524):
                return _walk(table, key_dtype, value_dtype)   # no batch ops here
            raise EbpfError(f"BPF_MAP_LOOKUP_BATCH on map fd {table.map_fd} failed: "
                            f"{errno.errorcode.get(err, err)}")
        if count.value == 0:
            break
    return keys[:total].copy(), values[:total].copy()


def _walk(table, key_dtype: np.dtype, value_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    items = list(table.items())
    if not items:
        return np.zeros(0, key_dtype), np.zeros(0, value_dtype)
    keys = np.frombuffer(b"".join(bytes(k) for k, _ in items), key_dtype)
    values = np.frombuffer(b"".join(bytes(v) for _, v in items), value_dtype)
    return keys, values
