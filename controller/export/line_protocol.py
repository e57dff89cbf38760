"""InfluxDB line protocol: format points (single and column-wise) and parse them back.

``measurement,tag=value field=1i,other=2.5,name="text" 1700000000000000000``

Escaping follows the InfluxDB rules: measurement escapes comma and space; tag
keys, tag values and field keys escape comma, equals and space; string field
values escape backslash and double quote.  Integers carry the ``i`` suffix,
floats are written with ``repr`` (round-trip exact), booleans as true/false;
NaN and infinite floats are not representable and are left out of the line
(a line whose fields all drop is left out entirely).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from controller.export.errors import LineProtocolError

FieldValue = int | float | bool | str


def escape_measurement(s: str) -> str:
    return s.replace("\\", "\\\\").replace(",", "\\,").replace(" ", "\\ ")


def escape_key(s: str) -> str:
    """Tag key, tag value or field key."""
    return s.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def escape_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_value(v: FieldValue) -> str | None:
    """One field value, or None when it cannot be written (NaN, inf)."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return f"{int(v)}i"
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return repr(f) if math.isfinite(f) else None
    if isinstance(v, str):
        return escape_string(v)
    raise LineProtocolError(f"field value {v!r} of type {type(v).__name__} is not int/float/bool/str")


@dataclass(slots=True, kw_only=True)
class Point:
    """One point: measurement, tags, fields and a timestamp in ns."""

    measurement: str
    fields: dict[str, FieldValue]
    tags: dict[str, str] = field(default_factory=dict)
    time_ns: int | None = None

    def to_line(self) -> str | None:
        return format_line(self.measurement, self.tags, self.fields, self.time_ns)


def format_line(measurement: str, tags: Mapping[str, str], fields: Mapping[str, FieldValue],
                time_ns: int | None = None) -> str | None:
    """One line (no newline), or None when no field is writable."""
    if not measurement:
        raise LineProtocolError("point has an empty measurement name")
    parts = []
    for k, v in fields.items():
        s = format_value(v)
        if s is not None:
            parts.append(f"{escape_key(k)}={s}")
    if not parts:
        return None
    head = escape_measurement(measurement)
    for k in sorted(tags):
        v = str(tags[k])
        if v:  # empty tag values are not allowed by the protocol
            head += f",{escape_key(k)}={escape_key(v)}"
    line = head + " " + ",".join(parts)
    return line if time_ns is None else f"{line} {int(time_ns)}"


def format_columns(
    measurement: str,
    *,
    tags: Mapping[str, Sequence[object] | np.ndarray],
    fields: Mapping[str, np.ndarray],
    time_ns: np.ndarray | int,
) -> list[str]:
    """Lines for n points given column-wise (numpy arrays of equal length).

    Integer arrays become integer fields, float arrays float fields (NaN left out),
    bool arrays booleans, object/str arrays strings.
    """
    cols = list(fields.items())
    n = len(cols[0][1]) if cols else 0
    times = np.broadcast_to(np.asarray(time_ns, dtype=np.int64), (n,))
    head_cols = []
    for k in sorted(tags):
        vals = [escape_key(str(v)) for v in np.asarray(tags[k]).tolist()]
        head_cols.append((escape_key(k), vals))
    m = escape_measurement(measurement)
    heads = [m] * n
    for k, vals in head_cols:
        heads = [h + f",{k}={v}" if v else h for h, v in zip(heads, vals)]
    rendered: list[list[str | None]] = []
    for k, arr in cols:
        a = np.asarray(arr)
        key = escape_key(k) + "="
        if a.dtype.kind == "b":
            rendered.append([key + ("true" if v else "false") for v in a.tolist()])
        elif a.dtype.kind in "iu":
            rendered.append([f"{key}{v}i" for v in a.tolist()])
        elif a.dtype.kind == "f":
            rendered.append([key + repr(v) if math.isfinite(v) else None for v in a.tolist()])
        else:
            rendered.append([key + escape_string(str(v)) for v in a.tolist()])
    out = []
    for i, (h, t) in enumerate(zip(heads, times.tolist())):
        fs = [r[i] for r in rendered if r[i] is not None]
        if fs:
            out.append(f"{h} {','.join(fs)} {t}")  # type: ignore[arg-type]
    return out


# ---- parsing (files, CSV conversion, tests) -----------------------------------------


def _split_unescaped(s: str, sep: str, strings: bool = True) -> list[str]:
    """Split on ``sep`` outside escapes and outside string values (a quote opens a
    string only right after an unescaped '=')."""
    out: list[str] = []
    cur: list[str] = []
    i, quoted, after_eq = 0, False, False
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i : i + 2])
            i += 2
            after_eq = False
            continue
        if strings and c == '"' and (quoted or after_eq):
            quoted = not quoted
        after_eq = c == "=" and not quoted
        if c == sep and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return out


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(s[i + 1])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def _parse_value(s: str, where: str) -> FieldValue:
    if s.startswith('"'):
        if len(s) < 2 or not s.endswith('"'):
            raise LineProtocolError(f"{where}: unterminated string {s!r}")
        return _unescape(s[1:-1])
    if s in ("true", "t", "T", "True", "TRUE"):
        return True
    if s in ("false", "f", "F", "False", "FALSE"):
        return False
    try:
        if s.endswith("i"):
            return int(s[:-1])
        if s.endswith("u"):
            return int(s[:-1])
        return float(s)
    except ValueError:
        raise LineProtocolError(f"{where}: bad field value {s!r}") from None


def parse_line(line: str) -> Point:
    """Inverse of ``format_line`` (raises LineProtocolError naming the problem)."""
    text = line.rstrip("\n")
    head = _split_unescaped(text, " ", strings=False)[0]
    parts = [head] + [p for p in _split_unescaped(text[len(head) + 1 :], " ") if p != ""]
    if len(parts) not in (2, 3):
        raise LineProtocolError(f"line {line[:80]!r}: expected 'series fields [time]'")
    series = _split_unescaped(parts[0], ",", strings=False)
    tags: dict[str, str] = {}
    for t in series[1:]:
        kv = _split_unescaped(t, "=")
        if len(kv) != 2:
            raise LineProtocolError(f"line {line[:80]!r}: bad tag {t!r}")
        tags[_unescape(kv[0])] = _unescape(kv[1])
    fields: dict[str, FieldValue] = {}
    for f in _split_unescaped(parts[1], ","):
        kv = _split_unescaped(f, "=")
        if len(kv) != 2:
            raise LineProtocolError(f"line {line[:80]!r}: bad field {f!r}")
        fields[_unescape(kv[0])] = _parse_value(kv[1], f"line {line[:40]!r} field {kv[0]!r}")
    stamp: int | None = None
    if len(parts) == 3:
        try:
            stamp = int(parts[2])
        except ValueError:
            raise LineProtocolError(f"line {line[:80]!r}: bad timestamp {parts[2]!r}") from None
    return Point(measurement=_unescape(series[0]), tags=tags, fields=fields, time_ns=stamp)


def count_lines(lines: Iterable[str]) -> int:
    return sum(1 for _ in lines)
