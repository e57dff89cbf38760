"""Action profiles and action selectors: indirect tables (v1model ``implementation``).

An entry of an indirect table points at a *member* (an action with its data) or at a
*group* of members; for a group, the hash of the table's ``selector`` key fields picks
one member per packet, so a flow always takes the same member (ECMP / LAG). Members and
groups are control-plane state, as P4Runtime's ActionProfileMember/Group model them.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from softswitch.errors import RuntimeApiError, RuntimeErrorCode
from softswitch.externs.hashes import HASH_ALGORITHMS, fields_to_bytes
from softswitch.tables import check_args, find_action


@dataclass(slots=True, kw_only=True)
class Member:
    """One member: the action to run and its data (duck-types a table entry for the pipeline)."""

    member_id: int
    action: str
    args: tuple[int, ...]
    fn: Callable[..., Any] | None = None


@dataclass(slots=True, kw_only=True)
class ActionProfile:
    """``action_profile(size)`` or, with `algorithm`, ``action_selector(algo, size, width)``."""

    name: str
    size: int
    algorithm: str | None = None
    output_width: int = 0
    actions: dict[str, Any] = field(default_factory=dict)   # action name -> ActionSpec
    members: dict[int, Member] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    max_group_size: dict[int, int] = field(default_factory=dict)
    selector_widths: tuple[int, ...] = ()
    # a kernel target's copy (the eBPF target's maps): told of each change after it is
    # made, as observer(profile, op, id) with op member, member_delete, group, group_delete
    observers: list[Callable[[ActionProfile, str, int], None]] = field(default_factory=list)
    # what that copy can hold (None: no limit): checked before anything changes
    max_groups: int | None = None
    max_group_members: int | None = None

    @property
    def is_selector(self) -> bool:
        return self.algorithm is not None

    # ------------------------------------------------------------ data plane
    def pick(self, entry: Any, selector: Sequence[int]) -> Any:
        """The member an entry resolves to for a packet with these selector values."""
        if entry.member is not None:
            return self.members[entry.member]
        ids = self.groups[entry.group]
        if not ids:
            return _EMPTY
        if len(ids) == 1:
            return self.members[ids[0]]
        h = HASH_ALGORITHMS[self.algorithm or "crc16"](fields_to_bytes(selector, self.selector_widths))
        if self.output_width:
            h &= (1 << self.output_width) - 1
        return self.members[ids[h % len(ids)]]

    # ---------------------------------------------------------- control plane
    def _where(self) -> str:
        return f"action profile {self.name}"

    def member_add(self, member_id: int, action: str, args: Sequence[int]) -> Member:
        if member_id in self.members:
            raise RuntimeApiError(RuntimeErrorCode.DUPLICATE_ENTRY, f"{self._where()}: member {member_id} exists")
        if len(self.members) >= self.size:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL, f"{self._where()}: full ({self.size} members)")
        m = Member(member_id=member_id, action=action, args=self._check_action(action, args))
        m.fn = self.actions[action].fn
        self.members[member_id] = m
        self._notify("member", member_id)
        return m

    def member_modify(self, member_id: int, action: str, args: Sequence[int]) -> Member:
        m = self._member(member_id)
        m.args = self._check_action(action, args)
        m.action, m.fn = action, self.actions[action].fn
        self._notify("member", member_id)
        return m

    def member_delete(self, member_id: int, used_by_entries: bool) -> None:
        self._member(member_id)
        users = [g for g, ids in self.groups.items() if member_id in ids]
        if users or used_by_entries:
            raise RuntimeApiError(RuntimeErrorCode.IN_USE,
                                  f"{self._where()}: member {member_id} is still used by "
                                  + (f"groups {users}" if users else "table entries"))
        del self.members[member_id]
        self._notify("member_delete", member_id)

    def group_add(self, group_id: int, member_ids: Sequence[int], max_size: int = 0) -> None:
        if not self.is_selector:
            raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED,
                                  f"{self._where()}: groups need an action_selector")
        if group_id in self.groups:
            raise RuntimeApiError(RuntimeErrorCode.DUPLICATE_ENTRY, f"{self._where()}: group {group_id} exists")
        if self.max_groups is not None and len(self.groups) >= self.max_groups:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"{self._where()}: full ({self.max_groups} groups on this target)")
        self.groups[group_id] = self._check_members(group_id, member_ids, max_size)
        self.max_group_size[group_id] = max_size
        self._notify("group", group_id)

    def group_modify(self, group_id: int, member_ids: Sequence[int]) -> None:
        if group_id not in self.groups:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"{self._where()}: no group {group_id}")
        self.groups[group_id] = self._check_members(group_id, member_ids,
                                                    self.max_group_size.get(group_id, 0))
        self._notify("group", group_id)

    def group_delete(self, group_id: int, used_by_entries: bool) -> None:
        if group_id not in self.groups:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"{self._where()}: no group {group_id}")
        if used_by_entries:
            raise RuntimeApiError(RuntimeErrorCode.IN_USE,
                                  f"{self._where()}: group {group_id} is still used by table entries")
        del self.groups[group_id]
        self.max_group_size.pop(group_id, None)
        self._notify("group_delete", group_id)

    def _notify(self, op: str, ident: int) -> None:
        for observe in self.observers:
            observe(self, op, ident)

    def _member(self, member_id: int) -> Member:
        m = self.members.get(member_id)
        if m is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"{self._where()}: no member {member_id}")
        return m

    def _check_members(self, group_id: int, member_ids: Sequence[int], max_size: int) -> list[int]:
        ids = list(member_ids)
        missing = [m for m in ids if m not in self.members]
        if missing:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                                  f"{self._where()}: group {group_id} names unknown members {missing}")
        if max_size and len(ids) > max_size:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"{self._where()}: group {group_id} has {len(ids)} members, max {max_size}")
        if self.max_group_members is not None and len(ids) > self.max_group_members:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"{self._where()}: group {group_id} has {len(ids)} members, this "
                                  f"target holds at most {self.max_group_members}")
        return ids

    def _check_action(self, action: str, args: Sequence[int]) -> tuple[int, ...]:
        where = self._where()
        return check_args(where, find_action(where, self.actions, action), args)


def _noop(*_: Any) -> None:
    return None


# an empty group runs no action (BMv2 drops nothing; the packet continues)
_EMPTY = Member(member_id=-1, action="", args=(), fn=_noop)
