"""Code-generating back ends of softswitch, one package per target.

The default target (``--target python``) is the compiler in ``softswitch.compiler``
(generated Python closures) run by ``softswitch.v1model``; ``ebpf/`` generates C for
the kernel's tc hook from the same checked program and shares the control-plane
objects (tables, P4Info names, runtime API) with it.
"""
