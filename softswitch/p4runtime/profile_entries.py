"""ActionProfileMember and ActionProfileGroup entries (indirect tables, action selectors).

Why separate from table entries: members and groups are objects of their own in
P4Runtime (written before the table entries that point at them, deleted after);
a table entry of an indirect table only names a member id or a group id.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from p4.v1 import p4runtime_pb2 as P

from softswitch.action_profiles import ActionProfile
from softswitch.errors import RuntimeApiError
from softswitch.p4runtime.errors import P4RuntimeError, invalid, unimplemented
from softswitch.p4runtime.state import PipelineState
from softswitch.p4runtime.table_entries import decode_params, encode_action


def _profile(st: PipelineState, profile_id: int, where: str) -> tuple[str, ActionProfile]:
    name = st.schema.action_profile(profile_id, where)
    try:
        return name, st.pipeline.switch.runtime.action_profile(name)
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def _runtime(call: Callable[[], object]) -> None:
    try:
        call()
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def decode_member_action(st: PipelineState, a: P.Action, where: str) -> tuple[str, list[int]]:
    info = st.schema.action(a.action_id, where)
    return info.name, decode_params(info, a, f"{where}: action {info.name}")


def write_member(st: PipelineState, utype: int, m: P.ActionProfileMember) -> None:
    name, _ = _profile(st, m.action_profile_id, "action_profile_member")
    where = f"action profile {name} member {m.member_id}"
    rt = st.pipeline.switch.runtime
    if utype == P.Update.DELETE:
        _runtime(lambda: rt.action_profile_member_delete(name, m.member_id))
        return
    if not m.HasField("action"):
        raise invalid(f"{where}: no action given")
    action, args = decode_member_action(st, m.action, where)
    if utype == P.Update.INSERT:
        _runtime(lambda: rt.action_profile_member_add(name, m.member_id, action, args))
    else:
        _runtime(lambda: rt.action_profile_member_modify(name, m.member_id, action, args))


def write_group(st: PipelineState, utype: int, g: P.ActionProfileGroup) -> None:
    name, prof = _profile(st, g.action_profile_id, "action_profile_group")
    where = f"action profile {name} group {g.group_id}"
    rt = st.pipeline.switch.runtime
    if utype == P.Update.DELETE:
        _runtime(lambda: rt.action_profile_group_delete(name, g.group_id))
        return
    members = []
    for mm in g.members:
        if mm.weight > 1:
            raise unimplemented(f"{where}: member {mm.member_id} weight {mm.weight} (only weight 1)")
        if mm.watch or mm.watch_port:
            raise unimplemented(f"{where}: member {mm.member_id}: watch ports are not supported")
        if mm.member_id in members:
            raise invalid(f"{where}: member {mm.member_id} given twice")
        members.append(mm.member_id)
    if g.max_size < 0:
        raise invalid(f"{where}: negative max_size {g.max_size}")
    if utype == P.Update.INSERT:
        _runtime(lambda: rt.action_profile_group_add(name, g.group_id, members, g.max_size))
    else:
        if g.max_size and g.max_size != prof.max_group_size.get(g.group_id, 0):
            raise invalid(f"{where}: max_size cannot change after the group is created")
        _runtime(lambda: rt.action_profile_group_modify(name, g.group_id, members))


def _profiles(st: PipelineState, profile_id: int, where: str) -> list[tuple[int, ActionProfile]]:
    ids = [profile_id] if profile_id else sorted(st.schema.action_profiles)
    return [(pid, _profile(st, pid, where)[1]) for pid in ids]


def read_members(st: PipelineState, q: P.ActionProfileMember) -> Iterator[P.ActionProfileMember]:
    for pid, prof in _profiles(st, q.action_profile_id, "action_profile_member"):
        ids = [q.member_id] if q.member_id else sorted(prof.members)
        for mid in ids:
            m = prof.members.get(mid)
            if m is not None:
                out = P.ActionProfileMember(action_profile_id=pid, member_id=mid)
                encode_action(st, m.action, m.args, out.action)
                yield out


def read_groups(st: PipelineState, q: P.ActionProfileGroup) -> Iterator[P.ActionProfileGroup]:
    for pid, prof in _profiles(st, q.action_profile_id, "action_profile_group"):
        ids = [q.group_id] if q.group_id else sorted(prof.groups)
        for gid in ids:
            members = prof.groups.get(gid)
            if members is not None:
                out = P.ActionProfileGroup(action_profile_id=pid, group_id=gid,
                                           max_size=prof.max_group_size.get(gid, 0))
                for mid in members:
                    out.members.add(member_id=mid, weight=1)
                yield out
