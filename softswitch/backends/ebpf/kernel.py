"""The kernel side: compile and load the generated C with bcc (as a tc classifier or
an XDP program), run packets through it with BPF_PROG_TEST_RUN, and release it all
(attaching is the switch process's: `softswitch.targets.ebpf.daemon`, `xdp_attach`).

Why BPF_PROG_TEST_RUN: it runs the loaded program on a packet the caller gives and
returns the verdict and the packet as the program left it, with no interface and no
namespace; the program records the chosen egress port in a map in test mode. So
STF tests and differential tests run the very program the switch attaches.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from typing import Any

from softswitch.backends.ebpf.errors import EbpfKernelError
from softswitch.backends.ebpf.hooks import DEFAULT_HOOK, TEST_REDIRECT
from softswitch.backends.ebpf.program import ENTRY, STATS

BPF_PROG_TEST_RUN = 10
TC_ACT_OK, TC_ACT_SHOT, TC_ACT_REDIRECT = 0, 2, 7
_NR_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine, 321)
MIN_TEST_FRAME = 14 + 40  # Ethernet + IPv6 header
MAX_FRAME = 9216 + 512   # room for what the program may add to a jumbo frame


class _TestRunAttr(ctypes.Structure):
    """``union bpf_attr``'s ``test`` member (linux/bpf.h)."""

    _fields_ = [("prog_fd", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("data_size_in", ctypes.c_uint32), ("data_size_out", ctypes.c_uint32),
                ("data_in", ctypes.c_uint64), ("data_out", ctypes.c_uint64),
                ("repeat", ctypes.c_uint32), ("duration", ctypes.c_uint32),
                ("ctx_size_in", ctypes.c_uint32), ("ctx_size_out", ctypes.c_uint32),
                ("ctx_in", ctypes.c_uint64), ("ctx_out", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32), ("_pad", ctypes.c_uint32)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

BPF_PROG_GET_FD_BY_ID, BPF_MAP_GET_FD_BY_ID, BPF_OBJ_GET_INFO_BY_FD = 13, 14, 15


class _InfoAttr(ctypes.Structure):
    """``union bpf_attr``'s ``info`` member."""

    _fields_ = [("bpf_fd", ctypes.c_uint32), ("info_len", ctypes.c_uint32), ("info", ctypes.c_uint64)]


class _GetIdAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32)]


def object_id(fd: int) -> int:
    """The kernel id of a BPF program or map fd (``bpf_prog_info.id``/``bpf_map_info.id``
    both sit after a 32-bit type)."""
    info = (ctypes.c_uint32 * 64)()
    attr = _InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    if _libc.syscall(_NR_BPF, BPF_OBJ_GET_INFO_BY_FD, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        err = ctypes.get_errno()
        raise EbpfKernelError(f"BPF_OBJ_GET_INFO_BY_FD({fd}): {os.strerror(err)}")
    return int(info[1])


def program_map_ids(prog_fd: int) -> list[int]:
    """Ids of the maps a loaded program uses (``bpf_prog_info.nr_map_ids``/``map_ids``)."""
    ids = (ctypes.c_uint32 * 256)()
    info = (ctypes.c_uint8 * 256)()
    ctypes.c_uint32.from_buffer(info, 52).value = 256          # nr_map_ids
    ctypes.c_uint64.from_buffer(info, 56).value = ctypes.addressof(ids)   # map_ids
    attr = _InfoAttr(bpf_fd=prog_fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    if _libc.syscall(_NR_BPF, BPF_OBJ_GET_INFO_BY_FD, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        err = ctypes.get_errno()
        raise EbpfKernelError(f"BPF_OBJ_GET_INFO_BY_FD({prog_fd}): {os.strerror(err)}")
    n = ctypes.c_uint32.from_buffer(info, 52).value
    return [int(ids[i]) for i in range(min(n, 256))]


def verified_insns(prog_fd: int) -> tuple[int, int]:
    """(instructions the verifier walked, instructions of the loaded program) of a program:
    ``bpf_prog_info.verified_insns`` (Linux 5.16; at most 1 M) and ``xlated_prog_len`` / 8."""
    info = (ctypes.c_uint8 * 256)()
    attr = _InfoAttr(bpf_fd=prog_fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    if _libc.syscall(_NR_BPF, BPF_OBJ_GET_INFO_BY_FD, ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        err = ctypes.get_errno()
        raise EbpfKernelError(f"BPF_OBJ_GET_INFO_BY_FD({prog_fd}): {os.strerror(err)}")
    return ctypes.c_uint32.from_buffer(info, 216).value, ctypes.c_uint32.from_buffer(info, 20).value // 8


def object_exists(kind: str, obj_id: int) -> bool:
    """Whether program/map `obj_id` still exists in the kernel (teardown checks)."""
    cmd = BPF_PROG_GET_FD_BY_ID if kind == "prog" else BPF_MAP_GET_FD_BY_ID
    attr = _GetIdAttr(id=obj_id)
    fd = _libc.syscall(_NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return True
    return False


def test_run(prog_fd: int, data: bytes, repeat: int = 1) -> tuple[int, bytes, int]:
    """(tc verdict, packet after the program, mean ns per run) of one BPF_PROG_TEST_RUN."""
    if len(data) < 14:
        raise EbpfKernelError(f"test run: a frame of {len(data)} bytes (the kernel needs an "
                              "Ethernet header, 14 bytes)")
    inp = ctypes.create_string_buffer(bytes(data), len(data))
    out = ctypes.create_string_buffer(len(data) + MAX_FRAME)
    attr = _TestRunAttr(prog_fd=prog_fd, data_size_in=len(data), data_size_out=len(out),
                        data_in=ctypes.addressof(inp), data_out=ctypes.addressof(out),
                        repeat=max(repeat, 1))
    rc = _libc.syscall(_NR_BPF, BPF_PROG_TEST_RUN, ctypes.byref(attr), ctypes.sizeof(attr))
    if rc != 0:
        err = ctypes.get_errno()
        raise EbpfKernelError(f"BPF_PROG_TEST_RUN failed: {os.strerror(err)} "
                              f"({errno.errorcode.get(err, err)})")
    return attr.retval, out.raw[:attr.data_size_out], attr.duration


class LoadedProgram:
    """One generated program compiled and loaded; `close()` frees every map and program."""

    def __init__(self, source: str, *, name: str = "softswitch", hook: str = DEFAULT_HOOK) -> None:
        from softswitch.backends.ebpf.probe import check_kernel
        check_kernel()
        from bcc import BPF  # imported late: check_kernel explains a missing bcc
        self.name = name
        self.source = source
        self.hook = hook
        self.redirect_verdict = TEST_REDIRECT[hook]
        try:
            self.bpf: Any = BPF(text=source.encode(), cflags=["-w", "-Wno-unused-label",
                                                               "-Wno-unused-function"])
            self.fn: Any = self.bpf.load_func(ENTRY.encode(), BPF.XDP if hook == "xdp" else BPF.SCHED_CLS)
        except Exception as exc:  # noqa: BLE001 - bcc raises bare Exception with the log
            raise EbpfKernelError(f"{name}: the kernel refused the generated program: {exc}") \
                from None
        self.closed = False
        self.test_now_ns = 0
        from softswitch.backends.ebpf.hashes_c import CUSTOM_DEFAULTS, crc_table
        for algo in ("crc16", "crc32"):
            tab = self.table(f"p4_{algo}_table")
            for i, v in enumerate(crc_table(algo)):
                tab[ctypes.c_int(i)] = ctypes.c_uint32(v)
        for custom, params in CUSTOM_DEFAULTS.items():
            self.set_custom_crc(custom, *params)

    def set_custom_crc(self, algo: str, polynomial: int, initial: int, final_xor: int,
                       reflect_input: bool, reflect_output: bool) -> None:
        """Parameters of ``crc16_custom`` / ``crc32_custom`` (the runtime's hash_set_custom)."""
        from softswitch.backends.ebpf.hashes_c import CUSTOM_CRCS
        from softswitch.externs.hashes import msb_crc_table
        cell, width = CUSTOM_CRCS[algo]
        tab = self.table(f"p4_{algo}_table")
        for i, v in enumerate(msb_crc_table(width, polynomial)):
            tab[ctypes.c_int(i)] = ctypes.c_uint32(v)
        cfg = self.table("p4_crc_custom_cfg")
        leaf = cfg.Leaf()
        leaf.init, leaf.final_xor = initial, final_xor
        leaf.refl_in, leaf.refl_out = int(reflect_input), int(reflect_output)
        cfg[ctypes.c_int(cell)] = leaf

    @property
    def fd(self) -> int:
        return int(self.fn.fd)

    def table(self, name: str) -> Any:
        return self.bpf[name.encode()]

    def set_test_port(self, port: int | None, length: int = 0, mark: int = 0, defer: bool = False) -> None:
        """Test mode (`port` = the ingress port of the next test runs, `length` the real
        length of a padded frame, `mark` a copy to run, `defer` to queue the packet's
        egress behind copies already queued) or live mode (None)."""
        cfg = self.table("p4_cfg")
        leaf = cfg.Leaf()
        leaf.test_mode = 1 if port is not None else 0
        leaf.test_port = port or 0
        leaf.test_len = length
        leaf.test_mark = mark
        leaf.test_defer = 1 if defer else 0
        leaf.test_now_ns = self.test_now_ns
        cfg[ctypes.c_int(0)] = leaf

    def set_test_clock(self, now_ns: int) -> None:
        """The program's clock in test runs (ns; 0 = the kernel's clock): the traffic
        manager's tests control time, differential tests pin the timestamps."""
        self.test_now_ns = int(now_ns)
        cfg = self.table("p4_cfg")
        leaf = cfg[ctypes.c_int(0)]
        leaf.test_now_ns = self.test_now_ns
        cfg[ctypes.c_int(0)] = leaf

    def run_test(self, port: int, data: bytes) -> tuple[int | None, bytes]:
        """(egress port or None when dropped, the frame as the program left it)."""
        out_port, out, _, _ = self.run_pass(port, data)
        return out_port, out

    def run_pass(self, port: int, data: bytes, mark: int = 0, defer: bool = False
                 ) -> tuple[int | None, bytes, int, list[int]]:
        """One pass of the program: the packet from `port`, or the clone `mark` names
        (over the same input). Returns the egress port (None: no output), the frame,
        its instance_type and the marks of the clones to run next, in order."""
        if len(data) < 14:
            raise EbpfKernelError(f"a frame of {len(data)} bytes: frames shorter than an Ethernet "
                                  "header (14 bytes) are not supported on --target ebpf (a tc "
                                  "program never sees one)")
        # the kernel refuses a test run of an IPv4/IPv6 frame shorter than its IP header:
        # pad it, and the program trims the padding before it parses
        padded = data + bytes(MIN_TEST_FRAME - len(data)) if len(data) < MIN_TEST_FRAME else data
        self.set_test_port(port, len(data) if padded is not data else 0, mark, defer)
        verdict, out, _ = test_run(self.fd, padded)
        res = self.table("p4_test_result")[ctypes.c_int(0)]
        marks = [int(res.marks[i]) for i in range(min(int(res.nclones), len(res.marks)))]
        if verdict != self.redirect_verdict or res.dropped:
            return None, out, 0, marks
        return int(res.port), out, int(res.itype), marks

    def kernel_ids(self) -> dict[str, list[int]]:
        """Ids of the program and every map it owns, as the kernel knows them."""
        return {"prog": [object_id(self.fd)], "map": program_map_ids(self.fd)}

    def open_digests(self, ring: str, queue: Any) -> None:
        """Digests of one type: each ring-buffer record becomes a tuple in `queue`
        (a `DigestQueue`, as the Python target fills it)."""
        tab = self.table(ring)
        names = [f[0] for f in tab.event_type._fields_] if hasattr(tab, "event_type") else None

        def on_record(_cpu: Any, data: Any, _size: Any) -> None:
            rec = tab.event(data)
            fields = names or [f[0] for f in type(rec)._fields_]
            queue.push(tuple(int(getattr(rec, f)) for f in fields))

        tab.open_ring_buffer(on_record)
        self.has_digests = True

    def poll_digests(self, timeout_ms: int) -> None:
        """Move what the program sent into the digest queues (0: what is there now)."""
        if getattr(self, "has_digests", False):
            if timeout_ms:
                self.bpf.ring_buffer_poll(timeout_ms)
            else:
                self.bpf.ring_buffer_consume()

    def stats(self) -> dict[str, int]:
        """Totals of the per-CPU statistics (received, transmitted, dropped ...)."""
        tab = self.table("p4_stats")
        return {name: int(sum(tab.getvalue(tab.Key(i)))) for i, name in enumerate(STATS)}

    def close(self) -> None:
        """Unload: bcc closes the program and map file descriptors (the kernel frees them
        once no attachment holds the program)."""
        if self.closed:
            return
        self.closed = True
        self.bpf.cleanup()
