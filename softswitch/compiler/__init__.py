"""Compiler from the checked P4 syntax tree to generated Python code.

The program is compiled once: each parser, control, action and function becomes
one Python function (generated source, compiled with ``compile``), each header,
struct and union type a class with ``__slots__``. Nothing walks the tree per packet.
"""
from softswitch.compiler.program import CompiledProgram, compile_program

__all__ = ["CompiledProgram", "compile_program"]
