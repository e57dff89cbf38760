"""What the server keeps per installed pipeline beside the switch itself.

Why separate: P4Runtime state that the runtime API does not model (the program's
original default actions for "reset to default", the controller_metadata and
metadata bytes of each entry, digest configurations) lives with the pipeline and
is dropped with it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2 as P

from softswitch.p4runtime.device import Pipeline
from softswitch.p4runtime.errors import P4RuntimeError, unimplemented
from softswitch.p4runtime.schema import Schema, TableInfo
from softswitch.tables import Table


@dataclass(slots=True, kw_only=True)
class PipelineState:
    pipeline: Pipeline
    schema: Schema
    initial_defaults: dict[str, tuple[str, tuple[int, ...]]]
    entry_extras: dict[tuple[str, int], tuple[int, bytes]] = field(default_factory=dict)
    digest_configs: dict[int, P.DigestEntry.Config] = field(default_factory=dict)

    @classmethod
    def create(cls, pipeline: Pipeline) -> PipelineState:
        tables = pipeline.switch.program.tables
        defaults = {name: (t.default.action, tuple(t.default.args)) for name, t in tables.items()}
        return cls(pipeline=pipeline, schema=Schema(pipeline.p4info), initial_defaults=defaults)

    def runtime_table(self, t: TableInfo) -> Table:
        rt = self.pipeline.switch.program.tables.get(t.name)
        if rt is None:
            raise unimplemented(f"table {t.name}: in the P4Info but not run by softswitch")
        return rt


__all__ = ["P4RuntimeError", "PipelineState"]
