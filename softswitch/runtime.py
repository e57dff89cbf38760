"""Runtime (control-plane) API of a running program: no transport, errors as an enum.

Everything a P4Runtime server or an STF runner needs: table entries and default
actions, counters, meters, registers, clone sessions, multicast groups, value
sets and digests. Each call validates fully before changing anything, and
refuses with `RuntimeApiError` whose `code` (`RuntimeErrorCode`) a transport
maps to its own status codes.

Names are P4Info names (``Ingress.ipv4_lpm``); a unique suffix after a dot
(``ipv4_lpm``) is accepted too, as STF files use short names.
"""
from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, TypeVar

from softswitch.action_profiles import ActionProfile
from softswitch.errors import ExternError, RuntimeApiError, RuntimeErrorCode
from softswitch.externs.stateful import Counter, Meter, MeterConfig, Register
from softswitch.objects import RuntimeObjects
from softswitch.tables import MatchValue, Table, TableEntry
from softswitch.v1model.pre import Replica, ReplicationEngine

V = TypeVar("V")


def resolve(kind: str, objects: dict[str, V], name: str) -> V:
    """Find `name` in `objects`: exact, else a unique dotted suffix; NOT_FOUND otherwise."""
    obj = objects.get(name)
    if obj is not None:
        return obj
    matches = [k for k in objects if k.endswith("." + name)]
    if len(matches) == 1:
        return objects[matches[0]]
    if len(matches) > 1:
        raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                              f"{kind} {name!r} is ambiguous: {sorted(matches)}")
    hint = difflib.get_close_matches(name, list(objects), n=1)
    raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                          f"{kind} {name!r} does not exist"
                          + (f"; did you mean {hint[0]!r}?" if hint else
                             f" (have: {', '.join(sorted(objects)) or 'none'})"))


class SwitchRuntime:
    """Control-plane operations on one program's run-time objects (`RuntimeObjects`,
    whatever target runs them) and its replication engine."""

    def __init__(self, program: RuntimeObjects, pre: ReplicationEngine) -> None:
        self.program = program
        self.pre = pre

    # ------------------------------------------------------------------ tables
    def table(self, name: str) -> Table:
        return resolve("table", self.program.tables, name)

    def _action(self, table: Table, action: str) -> str:
        if action in table.actions:
            return action
        return resolve(f"action of table {table.name}", {k: k for k in table.actions}, action)

    def table_add(self, table: str, key: Sequence[MatchValue | int], action: str,
                  args: Sequence[int] = (), priority: int = 0) -> TableEntry:
        t = self.table(table)
        return t.insert(list(key), self._action(t, action), list(args), priority)

    def table_modify(self, table: str, key: Sequence[MatchValue | int], action: str,
                     args: Sequence[int] = (), priority: int = 0) -> TableEntry:
        t = self.table(table)
        return t.modify(list(key), self._action(t, action), list(args), priority)

    def table_delete(self, table: str, key: Sequence[MatchValue | int], priority: int = 0) -> TableEntry:
        return self.table(table).delete(list(key), priority)

    def table_set_default(self, table: str, action: str, args: Sequence[int] = ()) -> None:
        t = self.table(table)
        t.set_default(self._action(t, action), list(args))

    def table_entries(self, table: str) -> list[TableEntry]:
        return self.table(table).entries()

    def table_clear(self, table: str) -> None:
        self.table(table).clear()

    # ----------------------------------------------- action profiles (indirect)
    def action_profile(self, name: str) -> ActionProfile:
        return resolve("action profile", self.program.action_profiles, name)

    def _profile_action(self, prof: ActionProfile, action: str) -> str:
        if action in prof.actions:
            return action
        return resolve(f"action of {prof.name}", {k: k for k in prof.actions}, action)

    def _profile_in_use(self, prof: ActionProfile, *, member: int | None = None,
                        group: int | None = None) -> bool:
        return any(t.profile is prof and t.refers_to(member=member, group=group)
                   for t in self.program.tables.values())

    def action_profile_member_add(self, profile: str, member_id: int, action: str,
                                  args: Sequence[int] = ()) -> None:
        prof = self.action_profile(profile)
        prof.member_add(member_id, self._profile_action(prof, action), list(args))

    def action_profile_member_modify(self, profile: str, member_id: int, action: str,
                                     args: Sequence[int] = ()) -> None:
        prof = self.action_profile(profile)
        prof.member_modify(member_id, self._profile_action(prof, action), list(args))

    def action_profile_member_delete(self, profile: str, member_id: int) -> None:
        prof = self.action_profile(profile)
        prof.member_delete(member_id, self._profile_in_use(prof, member=member_id))

    def action_profile_group_add(self, profile: str, group_id: int, members: Sequence[int],
                                 max_size: int = 0) -> None:
        self.action_profile(profile).group_add(group_id, list(members), max_size)

    def action_profile_group_modify(self, profile: str, group_id: int, members: Sequence[int]) -> None:
        self.action_profile(profile).group_modify(group_id, list(members))

    def action_profile_group_delete(self, profile: str, group_id: int) -> None:
        prof = self.action_profile(profile)
        prof.group_delete(group_id, self._profile_in_use(prof, group=group_id))

    def table_add_indirect(self, table: str, key: Sequence[MatchValue | int], *,
                           member: int | None = None, group: int | None = None,
                           priority: int = 0) -> TableEntry:
        """An entry of an indirect table: it runs a profile member or a group's member."""
        return self.table(table).insert_indirect(list(key), member=member, group=group, priority=priority)

    def table_modify_indirect(self, table: str, key: Sequence[MatchValue | int], *,
                              member: int | None = None, group: int | None = None,
                              priority: int = 0) -> TableEntry:
        return self.table(table).modify_indirect(list(key), member=member, group=group, priority=priority)

    # ---------------------------------------------------------------- counters
    def counter(self, name: str, cells: Sequence[int] | None = None) -> Counter:
        """The counter's object, its ``cells`` (all when None) current: targets whose
        cells live elsewhere (the kernel's maps) refresh only those, so a read of one
        index costs one cell."""
        return resolve("counter", self.program.counters, name)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one cell."""
        return self.counter(name).read(index)

    def counter_write(self, name: str, index: int, packets: int, nbytes: int) -> None:
        self.counter(name).write(index, packets, nbytes)

    def direct_counter_read(self, table: str, key: Sequence[MatchValue | int], priority: int = 0
                            ) -> tuple[int, int]:
        t = self.table(table)
        if not t.has_direct_counter:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"table {t.name} has no direct counter")
        e = t.find(list(key), priority)
        return e.packets, e.bytes

    def direct_counter_write(self, table: str, key: Sequence[MatchValue | int], packets: int,
                             nbytes: int, priority: int = 0) -> None:
        t = self.table(table)
        if not t.has_direct_counter:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"table {t.name} has no direct counter")
        if packets < 0 or nbytes < 0:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, f"table {t.name}: negative counter value")
        t.set_entry_counters(t.find(list(key), priority), packets, nbytes)

    # ------------------------------------------------------------------ meters
    def meter(self, name: str) -> Meter:
        return resolve("meter", self.program.meters, name)

    def meter_set(self, name: str, index: int, config: MeterConfig | None) -> None:
        self.meter(name).set_config(index, config)

    def meter_get(self, name: str, index: int) -> MeterConfig | None:
        return self.meter(name).get_config(index)

    def direct_meter_set(self, table: str, key: Sequence[MatchValue | int], config: MeterConfig | None,
                         priority: int = 0) -> None:
        t = self.table(table)
        if not t.has_direct_meter:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"table {t.name} has no direct meter")
        if config is not None:
            config.check(f"direct meter of table {t.name}")
        t.set_entry_meter(t.find(list(key), priority), config)

    # --------------------------------------------------------------- registers
    def register(self, name: str, cells: Sequence[int] | None = None) -> Register:
        """The register's object, its ``cells`` (all when None) current (as
        :meth:`counter`)."""
        return resolve("register", self.program.registers, name)

    def register_read(self, name: str, index: int) -> int:
        return self.register(name).control_read(index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.register(name).control_write(index, value)

    def register_reset(self, name: str) -> None:
        self.register(name).reset()

    # ------------------------------------------------------- replication (PRE)
    def clone_session_set(self, session: int, replicas: Sequence[Replica | int], *,
                          truncate: int = 0, class_of_service: int = 0) -> None:
        reps = [r if isinstance(r, Replica) else Replica(port=int(r)) for r in replicas]
        self.pre.session_set(session, reps, truncate=truncate, class_of_service=class_of_service)

    def clone_session_delete(self, session: int) -> None:
        self.pre.session_delete(session)

    def multicast_group_create(self, group: int, replicas: Sequence[Replica]) -> None:
        self.pre.group_create(group, list(replicas))

    def multicast_group_modify(self, group: int, replicas: Sequence[Replica]) -> None:
        self.pre.group_modify(group, list(replicas))

    def multicast_group_delete(self, group: int) -> None:
        self.pre.group_delete(group)

    def mc_node_create(self, rid: int, ports: Sequence[int]) -> int:
        return self.pre.node_create(rid, list(ports))

    def mc_node_associate(self, group: int, handle: int) -> None:
        self.pre.node_associate(group, handle)

    # ------------------------------------------------------------ custom CRCs
    def hash_set_custom(self, algorithm: str, *, polynomial: int, initial: int = 0, final_xor: int = 0,
                        reflect_input: bool = True, reflect_output: bool = True) -> None:
        """Configure one of the architecture's `custom_hashes` for this program
        (v1model: ``crc16_custom``, ``crc32_custom``, as BMv2's set_crc16_parameters /
        set_crc32_parameters; until then they equal crc16/crc32)."""
        from softswitch.externs.hashes import make_crc
        arch = self.program.arch
        width = arch.custom_hashes.get(algorithm)
        if width is None:
            have = " and ".join(sorted(arch.custom_hashes))
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, f"hash {algorithm!r}: " + (
                f"only {have} can be configured" if have else f"architecture {arch.name} has no configurable hash"))
        try:
            fn = make_crc(width, polynomial, initial, final_xor, reflect_input, reflect_output)
        except ExternError as exc:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, str(exc)) from exc
        self.program.bind_hash(algorithm, fn)

    # ------------------------------------------------------ value sets, digests
    def value_set_add(self, name: str, value: int, mask: int | None = None) -> None:
        resolve("value_set", self.program.value_sets, name).add(value, mask)

    def value_set_clear(self, name: str) -> None:
        resolve("value_set", self.program.value_sets, name).clear()

    def digest_pop(self, name: str) -> list[tuple[Any, ...]]:
        return resolve("digest", self.program.digests, name).pop_all()
