"""The Python target (``--target python``, the default): the program as generated
Python (``softswitch.backends.python``) run in this process by the v1model pipeline.

Modules: `pipeline` (`V1Switch`: BMv2 simple_switch's pipeline rules), `switch`
(`Switch`, the Python API), `device` and `daemon` (the switch process on network
interfaces: ports, traffic manager, P4Runtime), `local_device` (the in-process
P4Runtime device of tests).
"""
from __future__ import annotations

from typing import Any

from softswitch.architecture import Architecture
from softswitch.errors import CompileError
from softswitch.targets.base import Target, kernel_targets


class PythonTarget(Target):
    name = "python"
    summary = "generated Python in this process (default)"
    hooks = ()

    def build(self, checked: Any, arch: Architecture, **kw: Any) -> Any:
        from softswitch.backends.python.program import compile_program
        from softswitch.targets.python.switch import Switch
        kw.pop("dump_c", None)
        hook = kw.pop("hook", None)
        if hook not in (None, "tc"):
            need = " or ".join(repr(n) for n in kernel_targets())
            raise CompileError(f"hook {hook!r}: a kernel hook needs target {need}")
        return Switch(compile_program(checked, arch), **kw)

    def daemon(self, opts: Any) -> Any:
        from softswitch.targets.python.daemon import Switchd
        return Switchd(opts)
