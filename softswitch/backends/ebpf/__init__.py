"""softswitch's eBPF back end: the lowered program as C for the kernel's tc or XDP hook.

Modules: `v1model` (what the generator asks of the architecture object), `layout`
(C types, byte packing), `exprs`, `blocks` and `controls` (expressions, statements,
actions, table applies, controls, functions), `hashes_c` (hash algorithms),
`parser_c` (parser, deparser), `tables_c` (table maps and key layout), `program`
(the whole C file: `generate_c`), `meters_c` and `stateful_c` (meters, indirect
tables), `value_sets_c` (parser value sets), `clones` (clone sessions, multicast),
`queues` (the virtual queues), `hooks` (tc vs XDP), `kernel` (bcc load,
BPF_PROG_TEST_RUN), `maps` and `profiles` (entries, profile members and groups
mirrored into maps). The target that runs it (`EbpfSwitch`, its runtime API, the
switch process) is ``softswitch.targets.ebpf``.
"""
from softswitch.backends.ebpf.errors import EbpfKernelError, EbpfUnsupported

__all__ = ["EbpfKernelError", "EbpfUnsupported"]
