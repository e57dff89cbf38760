"""The runtime's side of an indirect table's action profile: members and selector
groups mirrored into the table's BPF maps (`tables_c`: ``tbl_X_mem``, ``tbl_X_grp``).

As with entries, the control-plane state stays in the shared `ActionProfile` (so the
runtime API, P4Runtime and reconcile validate and answer as on the Python target); a
`ProfileMirror` observes it and writes each member as a table value (its action and
data) at a slot of its own, and each group as the list of its members' slots. An
entry of the table then names a member's or a group's slot (`slot_of`), so a changed
member or group reaches every entry that uses it at once. The profile is told what
the maps hold (groups, members per group) and refuses more before it changes.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from softswitch.action_profiles import ActionProfile
from softswitch.backends.ebpf.kernel import LoadedProgram
from softswitch.backends.ebpf.tables_c import TableLayout
from softswitch.errors import RuntimeApiError, RuntimeErrorCode


class _Slots:
    """Dense slots for ids (a member's or a group's cell in its array)."""

    def __init__(self, size: int, what: str) -> None:
        self.what = what
        self.of: dict[int, int] = {}
        self.free = list(range(size - 1, -1, -1))

    def get(self, ident: int) -> int:
        slot = self.of.get(ident)
        if slot is None:
            if not self.free:
                raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL, f"{self.what}: no slot left")
            slot = self.of[ident] = self.free.pop()
        return slot

    def release(self, ident: int) -> None:
        slot = self.of.pop(ident, None)
        if slot is not None:
            self.free.append(slot)


class ProfileMirror:
    """Keeps one indirect table's member and group maps equal to its `ActionProfile`.

    `fill_value(leaf, action, args)` writes an action and its data into a table value
    (the table mirror's encoder: members are values of the same layout)."""

    def __init__(self, prog: LoadedProgram, layout: TableLayout, profile: ActionProfile,
                 fill_value: Callable[[Any, str, tuple[int, ...]], None]) -> None:
        self.profile = profile
        self.layout = layout
        self.fill_value = fill_value
        self.members_map = prog.table(layout.cname + "_mem")
        self.groups_map = prog.table(layout.cname + "_grp") if layout.group_members else None
        where = f"action profile {profile.name} on --target ebpf"
        self.members = _Slots(layout.profile_size, where + " (members)")
        self.groups = _Slots(layout.profile_size, where + " (groups)")
        if layout.group_members:
            profile.max_groups = layout.profile_size
            profile.max_group_members = layout.group_members

    def sync_all(self) -> None:
        """Write every member and group the profile has (made before the program loaded)."""
        for mid in self.profile.members:
            self._write_member(mid)
        for gid in self.profile.groups:
            self._write_group(gid)

    def attach(self) -> None:
        self.sync_all()
        self.profile.observers.append(self.changed)

    def detach(self) -> None:
        if self.changed in self.profile.observers:
            self.profile.observers.remove(self.changed)

    def slot_of(self, *, member: int | None = None, group: int | None = None) -> int:
        """The slot an entry names (the member or group exists: the profile checked)."""
        if member is not None:
            return self.members.get(member)
        assert group is not None
        return self.groups.get(group)

    # ------------------------------------------------------------- observer
    def changed(self, profile: ActionProfile, op: str, ident: int) -> None:
        try:
            if op == "member":
                self._write_member(ident)
            elif op == "member_delete":
                self.members.release(ident)
            elif op == "group":
                self._write_group(ident)
            elif op == "group_delete":
                self.groups.release(ident)
        except OSError as exc:
            raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED,
                                  f"action profile {profile.name}: kernel map update failed: {exc}") from exc

    def _write_member(self, mid: int) -> None:
        m = self.profile.members[mid]
        leaf = self.members_map.Leaf()
        self.fill_value(leaf, m.action, m.args)
        self.members_map[ctypes.c_int(self.members.get(mid))] = leaf

    def _write_group(self, gid: int) -> None:
        if self.groups_map is None:
            return
        ids = self.profile.groups[gid]
        cell = self.groups_map.Leaf()
        cell.n = len(ids)
        for i, mid in enumerate(ids):
            cell.m[i] = self.members.get(mid)
        self.groups_map[ctypes.c_int(self.groups.get(gid))] = cell
