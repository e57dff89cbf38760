"""softswitch's eBPF target (``--target ebpf``): the program as a tc classifier in the kernel.

Modules: `v1model` (what the generator asks of the architecture object), `layout`
(C types, byte packing), `exprs`, `blocks` and `controls` (expressions, statements,
actions, table applies, controls, functions), `hashes_c` (hash algorithms),
`parser_c` (parser, deparser), `tables_c` (table maps and key layout), `program`
(the whole C file), `meters_c` and `stateful_c` (meters, indirect tables),
`value_sets_c` (parser value sets), `kernel`
(bcc load, BPF_PROG_TEST_RUN), `maps` and `profiles` (entries, profile members and
groups mirrored into maps), `runtime` (counters, registers, meters), `switch` (`EbpfSwitch`, the API),
`daemon` (the switch process on interfaces).
"""
from softswitch.backends.ebpf.errors import EbpfKernelError, EbpfUnsupported
from softswitch.backends.ebpf.switch import EbpfSwitch

__all__ = ["EbpfKernelError", "EbpfSwitch", "EbpfUnsupported"]
