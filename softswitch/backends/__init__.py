"""Code-generating back ends of softswitch, one package per target.

Both start from the lowered program (``softswitch.lowering``): ``python/`` (the default,
``--target python``) generates Python closures run by ``softswitch.v1model``; ``ebpf/``
generates C for the kernel's tc hook and mirrors the Python back end's run-time objects
(tables, counters, registers) into its maps, so both have one runtime API.
"""
