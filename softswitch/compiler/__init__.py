"""Compiler from the checked P4 syntax tree to generated Python code.

The program is compiled once: each parser, control, action and function becomes
one Python function (generated source, compiled with ``compile``), each header,
struct and union type a class with ``__slots__``. Nothing walks the tree per packet.
The compiler knows P4_16 and core.p4 only; an `Architecture` (v1model's is
`softswitch.v1model.V1MODEL`) supplies the package, the externs and their meaning.
"""
from softswitch.compiler.architecture import Architecture, ExternOp, ExternSemantics
from softswitch.compiler.program import CompiledProgram, compile_program

__all__ = ["Architecture", "CompiledProgram", "ExternOp", "ExternSemantics", "compile_program"]
