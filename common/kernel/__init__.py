"""Linux kernel plumbing that more than one layer drives: network namespaces, veth
links, tc attachment and port shaping.

- :mod:`common.kernel.setns`: run a block inside a named network namespace (netlink
  sockets made there belong to it)
- :mod:`common.kernel.tc`: attach a loaded BPF program to clsact ingress/egress and
  detach it for sure (the host's INT sink and loss emulator, the eBPF switch target)
- :mod:`common.kernel.shaping`: the tc commands that pace a port behind a FIFO (the
  test bed's routers, BMv2 and the eBPF switch target)
- :mod:`common.kernel.netns`: namespaces and veth pairs with teardown, for tests,
  benchmarks and light test beds
- :mod:`common.kernel.errors`: ``AttachError``, raised by the attach paths

They live below ``ebpf``, ``softswitch`` and ``mininet_topos`` so that none of those
imports a sibling or a higher layer to reach the kernel.
"""
