"""The target registry and the layers it sits on: a third target is one `Target` subclass
plus one registry entry; what sits below the targets imports none of them."""
from __future__ import annotations

import argparse
import ast
from typing import Any

import pytest
from ssw_helpers import EXAMPLES, ROOT

from softswitch import Switch
from softswitch.errors import CompileError
from softswitch.targets import TARGETS, build, target_named
from softswitch.targets.python import PythonTarget

SOFTSWITCH = ROOT / "softswitch"
IPV4 = EXAMPLES / "ipv4_forward.p4"


class CountingTarget(PythonTarget):
    """A third target for the test: the Python target's switch, counting its builds."""

    name = "counting"
    summary = "the Python target, counted"
    built = 0

    def build(self, checked: Any, arch: Any, **kw: Any) -> Any:
        CountingTarget.built += 1
        return super().build(checked, arch, **kw)


def test_the_registry_names_both_targets_and_refuses_others() -> None:
    assert list(TARGETS) == ["python", "ebpf"]
    assert target_named("ebpf").hooks == ("tc", "xdp") and target_named("ebpf").dumps_source
    assert target_named("python").hooks == ()
    with pytest.raises(CompileError, match=r"unknown target 'nope' \(have: python, ebpf\)"):
        Switch.from_file(IPV4, target="nope")


def test_the_python_target_refuses_a_kernel_hook_naming_the_target_that_has_one() -> None:
    with pytest.raises(CompileError, match="hook 'xdp': a kernel hook needs target 'ebpf'"):
        Switch.from_file(IPV4, hook="xdp")


def test_a_third_target_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered, it is built by `Switch.from_file(target=)` and `build`, and offered by
    the command lines' --target."""
    from softswitch.cli._load import add_target_args
    from softswitch.frontend.load import load_program
    from softswitch.v1model import V1MODEL

    monkeypatch.setitem(TARGETS, "counting", CountingTarget())
    before = CountingTarget.built
    sw = Switch.from_file(IPV4, target="counting")
    assert CountingTarget.built == before + 1
    assert sw.process(1, bytes(64)) == []          # no entries: the default action drops
    build(load_program(IPV4), V1MODEL, target="counting")
    assert CountingTarget.built == before + 2
    parser = argparse.ArgumentParser()
    add_target_args(parser)
    assert parser.parse_args(["--target", "counting"]).target == "counting"
    assert "counting: the Python target, counted" in " ".join(parser.format_help().split())


def _imports(folder: str) -> set[str]:
    found: set[str] = set()
    for path in (SOFTSWITCH / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize(("folder", "banned"), [
    ("v1model", ("softswitch.backends", "softswitch.targets", "softswitch.runtime")),
    ("lowering", ("softswitch.backends", "softswitch.targets", "softswitch.v1model")),
    ("backends/ebpf", ("softswitch.backends.python", "softswitch.targets", "softswitch.switchd",
                       "softswitch.p4runtime", "softswitch.runtime")),
    ("backends/python", ("softswitch.backends.ebpf", "softswitch.targets", "softswitch.switchd",
                         "softswitch.p4runtime", "softswitch.runtime")),
    ("p4runtime", ("softswitch.backends", "softswitch.targets", "softswitch.runtime")),
    ("switchd", ("softswitch.backends", "softswitch.targets", "softswitch.runtime")),
])
def test_a_layer_imports_nothing_above_it(folder: str, banned: tuple[str, ...]) -> None:
    """core -> architecture -> back ends -> targets: the eBPF back end is not built on
    the Python one, and the daemon plumbing and P4Runtime know no target."""
    wrong = sorted(m for m in _imports(folder) if m.startswith(banned))
    assert not wrong, f"softswitch/{folder} imports {wrong}"
