"""Lexical scopes for name resolution, with "did you mean" suggestions.

Why a chain of dicts: P4 scoping is strictly lexical (top level, parser/control, action,
block); functions and extern functions may be overloaded by parameter count, so a
name maps to a list of declarations.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from . import ast as A
from .errors import P4NameError

_OVERLOADABLE = (A.ExternFunctionDecl, A.FunctionDecl, A.MethodDecl)


@dataclass(slots=True)
class Scope:
    parent: Scope | None = None
    names: dict[str, list[Any]] = field(default_factory=dict)
    kind: str = "block"

    def child(self, kind: str = "block") -> Scope:
        return Scope(parent=self, kind=kind)

    def declare(self, name: str, decl: Any, loc: A.SourceLoc) -> None:
        existing = self.names.get(name)
        if existing:
            overload = isinstance(decl, _OVERLOADABLE) and all(isinstance(d, _OVERLOADABLE) for d in existing)
            if overload and all(len(d.params) != len(decl.params) for d in existing):
                existing.append(decl)
                return
            prev = existing[0]
            where = f" (previous declaration at {prev.loc})" if getattr(prev, "loc", None) else ""
            raise P4NameError(loc, f"'{name}' is already declared{where}")
        self.names[name] = [decl]

    def lookup_all(self, name: str) -> list[Any] | None:
        s: Scope | None = self
        while s is not None:
            found = s.names.get(name)
            if found:
                return found
            s = s.parent
        return None

    def lookup(self, name: str) -> Any | None:
        found = self.lookup_all(name)
        return found[0] if found else None

    def visible_names(self) -> list[str]:
        out: list[str] = []
        s: Scope | None = self
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out

    def suggest(self, name: str, *, candidates: list[str] | None = None) -> str:
        pool = candidates if candidates is not None else self.visible_names()
        close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
        return f"; did you mean '{close[0]}'?" if close else ""

    def require(self, name: str, loc: A.SourceLoc, what: str = "name") -> Any:
        found = self.lookup(name)
        if found is None:
            raise P4NameError(loc, f"undeclared {what} '{name}'{self.suggest(name)}")
        return found
