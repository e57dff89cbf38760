"""Random typed P4 expressions, compiled by the switch and evaluated by a small reference
interpreter written here from the P4_16 specification's rules (differential test)."""
from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from ssw_helpers import program

from softswitch.packet import PacketReader, make_extract_plan

# types: ("bit", W) or ("int", W)
B8, B16, B4, S8, S16 = ("bit", 8), ("bit", 16), ("bit", 4), ("int", 8), ("int", 16)
TYPES = [B8, B16, S8, S16, B4]
INPUTS = {"a": B8, "b": B8, "c": B16, "s": S8, "t": S16}


@dataclass
class E:
    text: str
    typ: tuple[str, int]
    fn: object  # callable(env) -> int


def wrap(v: int, t: tuple[str, int]) -> int:
    kind, w = t
    v &= (1 << w) - 1
    if kind == "int" and v >> (w - 1):
        v -= 1 << w
    return v


def tname(t):
    return f"{t[0]}<{t[1]}>"


def gen(rng: random.Random, t: tuple[str, int], depth: int) -> E:
    kind, w = t
    leaves = [n for n, nt in INPUTS.items() if nt == t]
    if depth == 0 or rng.random() < 0.25:
        if leaves and rng.random() < 0.7:
            n = rng.choice(leaves)
            return E(f"hdr.i.{n}", t, lambda env, n=n: env[n])
        v = wrap(rng.randrange(1 << w), t)
        lit = f"{w}{'s' if kind == 'int' else 'w'}{v}" if v >= 0 else f"-{w}s{-v}"
        if v < 0:
            return E(f"({lit})", t, lambda env, v=v: v)
        return E(lit, t, lambda env, v=v: v)
    choice = rng.choice(["bin", "bin", "bin", "un", "cast", "sat", "shift", "tern", "slice", "concat"])
    if choice == "bin":
        op = rng.choice(["+", "-", "*", "&", "|", "^"])
        x, y = gen(rng, t, depth - 1), gen(rng, t, depth - 1)
        f = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
             "&": lambda p, q: p & q, "|": lambda p, q: p | q, "^": lambda p, q: p ^ q}[op]
        return E(f"({x.text} {op} {y.text})", t, lambda env: wrap(f(x.fn(env), y.fn(env)), t))
    if choice == "un":
        op = rng.choice(["~", "-"])
        x = gen(rng, t, depth - 1)
        if op == "~":
            return E(f"(~{x.text})", t, lambda env: wrap(~x.fn(env), t))
        return E(f"(-{x.text})", t, lambda env: wrap(-x.fn(env), t))
    if choice == "cast":
        src = rng.choice([s for s in TYPES if s != t])
        x = gen(rng, src, depth - 1)
        if src[0] != t[0] and src[1] != t[1]:
            # P4 casts change either sign or width in one step: go through bit<src width>
            mid = ("bit", src[1]) if src[0] == "int" else ("int", src[1])
            inner = f"({tname(mid)}){x.text}"
            return E(f"(({tname(t)})({inner}))", t, lambda env: wrap(wrap(x.fn(env), mid), t))
        return E(f"(({tname(t)}){x.text})", t, lambda env: wrap(x.fn(env), t))
    if choice == "sat":
        op = rng.choice(["|+|", "|-|"])
        x, y = gen(rng, t, depth - 1), gen(rng, t, depth - 1)
        lo, hi = (0, (1 << w) - 1) if kind == "bit" else (-(1 << (w - 1)), (1 << (w - 1)) - 1)

        def sat(env):
            v = x.fn(env) + y.fn(env) if op == "|+|" else x.fn(env) - y.fn(env)
            return max(lo, min(hi, v))
        return E(f"({x.text} {op} {y.text})", t, sat)
    if choice == "shift":
        op = rng.choice(["<<", ">>"])
        n = rng.randrange(w + 2)
        x = gen(rng, t, depth - 1)
        if op == "<<":
            return E(f"({x.text} << {n})", t, lambda env: wrap(x.fn(env) << n, t))
        return E(f"({x.text} >> {n})", t, lambda env: wrap(x.fn(env) >> n, t))
    if choice == "tern":
        ct = rng.choice(TYPES)
        p, q = gen(rng, ct, depth - 1), gen(rng, ct, depth - 1)
        cmp = rng.choice(["==", "!=", "<", "<=", ">", ">="])
        x, y = gen(rng, t, depth - 1), gen(rng, t, depth - 1)
        f = {"==": lambda u, v: u == v, "!=": lambda u, v: u != v, "<": lambda u, v: u < v,
             "<=": lambda u, v: u <= v, ">": lambda u, v: u > v, ">=": lambda u, v: u >= v}[cmp]
        return E(f"({p.text} {cmp} {q.text} ? {x.text} : {y.text})", t,
                 lambda env: x.fn(env) if f(p.fn(env), q.fn(env)) else y.fn(env))
    if choice == "slice" and kind == "bit":
        src = rng.choice([B8, B16])
        if src[1] >= w:
            lo = rng.randrange(src[1] - w + 1)
            x = gen(rng, src, depth - 1)
            return E(f"({x.text}[{lo + w - 1}:{lo}])", t, lambda env: (x.fn(env) >> lo) & ((1 << w) - 1))
    if choice == "concat" and w == 16:
        x = gen(rng, (kind, 8), depth - 1)
        y = gen(rng, B8, depth - 1)
        return E(f"({x.text} ++ {y.text})", t,
                 lambda env: wrap(((x.fn(env) & 0xFF) << 8) | (y.fn(env) & 0xFF), t))
    return gen(rng, t, depth - 1)


@pytest.mark.parametrize("seed", [2024, 7, 99, 12345])
def test_random_expressions_match_reference(seed):
    rng = random.Random(seed)
    exprs = [gen(rng, rng.choice(TYPES), 3) for _ in range(60)]
    fields = " ".join(f"{tname(e.typ)} o{i};" for i, e in enumerate(exprs))
    body = "\n".join(f"        hdr.o.o{i} = {e.text};" for i, e in enumerate(exprs))
    sw = program(decls=f"""
    header in_t {{ bit<8> a; bit<8> b; bit<16> c; int<8> s; int<16> t; }}
    header out_t {{ {fields} }}
    struct headers_t {{ in_t i; out_t o; }}
    struct meta_t {{ }}
    """, parser="state start { pkt.extract(hdr.i); transition accept; }", ingress=f"""
    apply {{
        sm.egress_spec = 1;
        hdr.o.setValid();
{body}
    }}""", deparser="pkt.emit(hdr.o);")
    extract = make_extract_plan([e.typ[1] for e in exprs])
    for _ in range(60):
        env = {n: wrap(rng.randrange(1 << t[1]), t) for n, t in INPUTS.items()}
        raw = b"".join((env[n] & ((1 << t[1]) - 1)).to_bytes(t[1] // 8, "big") for n, t in INPUTS.items())
        ((_, out),) = sw.process(0, raw)
        got = extract(PacketReader(out))
        for i, (e, g) in enumerate(zip(exprs, got)):
            want = e.fn(env) & ((1 << e.typ[1]) - 1)
            assert g == want, f"o{i} = {e.text} with {env}: switch {g:#x}, reference {want:#x}"
