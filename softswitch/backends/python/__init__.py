"""The Python back end (``--target python``): the lowered program as generated Python.

The program is compiled once: each parser, control, action and function becomes
one Python function (generated source, compiled with ``compile``), each header,
struct and union type a class with ``__slots__``. Nothing walks the tree per packet.
It knows P4_16 and core.p4 only; an `Architecture` (v1model's is
`softswitch.v1model.V1MODEL`) supplies the package, the externs and their meaning,
and `softswitch.lowering` the instances, tables and their control-plane names.
Entry point: `softswitch.backends.python.program.compile_program` (not imported here:
the architecture contract imports this package's per-packet context).
"""
