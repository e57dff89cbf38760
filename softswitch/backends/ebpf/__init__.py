"""softswitch's eBPF target (``--target ebpf``): the program as a tc classifier in the kernel.

Modules: `v1model` (the architecture's rules the generator needs), `layout` (C types,
byte packing), `exprs` and `blocks` (expressions, statements, actions, controls,
table applies), `parser_c` (parser, deparser), `tables_c` (table maps and key
layout), `program` (the whole C file), `kernel` (bcc load, BPF_PROG_TEST_RUN),
`maps` (entries mirrored into maps), `switch` (`EbpfSwitch`, the API), `daemon`
(the switch process on interfaces).
"""
from softswitch.backends.ebpf.errors import EbpfKernelError, EbpfUnsupported
from softswitch.backends.ebpf.switch import EbpfSwitch

__all__ = ["EbpfKernelError", "EbpfSwitch", "EbpfUnsupported"]
