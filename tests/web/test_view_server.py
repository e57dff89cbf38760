"""The page's model from a state file, and its HTTP server on loopback (real sockets)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controller.topology import load_topology
from controller.web import WebError, WebServer, build_view, parse_web_address
from controller.web.server import check_web_exposure

from .webfix import TOPOLOGY, recorded_state


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def test_view_joins_hops_and_losses_to_link_directions() -> None:
    from controller.topology import directed_links
    topo = load_topology(str(TOPOLOGY))
    lossy = directed_links(topo)[0].name
    v = build_view(recorded_state(lossy=lossy), topo, live=False)
    by = {d["name"]: d for d in v["directions"]}
    assert {d.name for d in directed_links(topo)} <= set(by)
    assert by[lossy]["recent_loss_rate"] == 0.08 and by[lossy]["lost"] == 80
    assert by[lossy]["loss_ci95"] == [pytest.approx(0.064), pytest.approx(0.096)]
    assert by[lossy]["utilisation"] == 0.4 and by[lossy]["qlen_pkts"] == 4
    assert by[lossy]["queue_limit_pkts"] == next(ln.queue_pkts for ln in topo.links if ln.name == by[lossy]["link"])
    assert {n["name"] for n in v["nodes"]} == {*topo.switch_names, *topo.host_names}
    assert v["flows"][0]["fec"] == [8, 1] and v["flows"][0]["path"] == list(topo.switch_names)
    assert v["alerts"]["active"][0]["subject"] == lossy
    assert v["diagnosis"]["culprits"][0]["component"] == lossy
    # the mitigation: its mode, its action with reason and evidence, both directions of
    # the link it keeps the routes off marked
    m = v["mitigation"]
    assert m["mode"] == "act" and m["actions"][0]["verb"] == "reroute"
    assert m["actions"][0]["reason"].startswith(f"gray_loss on {lossy}")
    assert m["actions"][0]["evidence"]["loss_rate"] == 0.08
    assert {n for n, d in by.items() if d["avoided"]} == {
        d.name for d in directed_links(topo) if d.link == by[lossy]["link"]}


def test_view_lists_the_latest_mitigation_actions_newest_first() -> None:
    from controller.web.view import MITIGATION_ROWS
    topo = load_topology(str(TOPOLOGY))
    acts = [{"seq": i, "verb": "reroute" if i % 2 else "undo", "target": "x", "at": float(i),
             "undoes": None if i % 2 else i - 1, "bogus": 1} for i in range(1, 121)]
    v = build_view({"mitigation": {"mode": "advise", "actions": [*acts, "not an action"]}}, topo, live=True)
    seqs = [a["seq"] for a in v["mitigation"]["actions"]]
    assert seqs == list(range(120, 120 - MITIGATION_ROWS, -1))
    assert "bogus" not in v["mitigation"]["actions"][0]
    assert v["mitigation"]["avoided"] == [] and not any(d["avoided"] for d in v["directions"])
    assert build_view({"mitigation": None}, topo, live=True)["mitigation"] is None


def test_view_of_an_empty_state_has_the_topology_only() -> None:
    topo = load_topology(str(TOPOLOGY))
    v = build_view({}, topo, live=True)
    assert v["flows"] == [] and v["alerts"]["active"] == []
    assert all(d["utilisation"] is None and d["loss_rate"] is None for d in v["directions"])


@pytest.mark.parametrize(("text", "addr"), [("127.0.0.1:8080", ("127.0.0.1", 8080)),
                                            (":0", ("127.0.0.1", 0)), ("9000", ("127.0.0.1", 9000)),
                                            ("[::1]:80", ("::1", 80))])
def test_web_addresses(text: str, addr: tuple[str, int]) -> None:
    assert parse_web_address(text) == addr


@pytest.mark.parametrize("text", ["host:port", "127.0.0.1:70000"])
def test_bad_web_addresses_are_named(text: str) -> None:
    with pytest.raises(WebError, match="--web"):
        parse_web_address(text)


def test_token_beyond_loopback_only() -> None:
    assert check_web_exposure("127.0.0.1", None) is None
    assert len(check_web_exposure("0.0.0.0", None) or "") >= 16
    assert check_web_exposure("0.0.0.0", "x" * 20) == "x" * 20
    with pytest.raises(WebError, match="16 characters"):
        check_web_exposure("127.0.0.1", "short")


def test_server_serves_page_script_plotly_and_view() -> None:
    topo = load_topology(str(TOPOLOGY))
    builds = []

    def view() -> dict:
        builds.append(1)
        return build_view(recorded_state(), topo, live=True)

    srv = WebServer(view=view, version=lambda: "v1").start()
    try:
        base = srv.url
        code, body, ctype = _get(base)
        assert code == 200 and b"static/app.js" in body and ctype.startswith("text/html")
        code, body, _ = _get(base + "static/plotly.min.js")
        assert code == 200 and len(body) > 1_000_000        # the whole library, served locally
        code, body, _ = _get(base + "static/app.js")
        assert code == 200 and b"api/view" in body
        for _ in range(3):
            code, body, ctype = _get(base + "api/view")
            assert code == 200 and ctype == "application/json"
        assert json.loads(body)["topology"] == topo.name
        assert len(builds) == 1                               # built once per snapshot version
        code, body, _ = _get(base + "static/../server.py")
        assert code == 404
        assert _get(base + "nothing")[0] == 404
    finally:
        srv.stop()


def test_server_beyond_loopback_needs_the_token() -> None:
    srv = WebServer(view=lambda: {"nan": float("nan")}, token="t" * 20).start()
    try:
        base = srv.url.split("?")[0]
        code, body, _ = _get(base + "api/view")
        assert code == 401 and b"token" in body
        code, body, _ = _get(base + "api/view?token=" + "x" * 20)
        assert code == 401
        code, body, _ = _get(base + "api/view?token=" + "t" * 20)
        assert code == 200 and json.loads(body) == {"nan": None}   # NaN never reaches the page
        code, _, _ = _get(base + "api/view", {"Authorization": "Bearer " + "t" * 20})
        assert code == 200
        assert srv.rejected == 2
    finally:
        srv.stop()


def test_a_failing_view_is_an_error_response_not_a_dead_server() -> None:
    def boom() -> dict:
        raise KeyError("hops")
    srv = WebServer(view=boom).start()
    try:
        code, body, _ = _get(srv.url + "api/view")
        assert code == 500 and b"hops" in json.loads(body)["error"].encode()
        assert _get(srv.url)[0] == 200
    finally:
        srv.stop()


def test_controller_web_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from controller.cli import main
    assert main(["web", "--out", str(tmp_path)]) == 2
    assert "no controller state" in capsys.readouterr().err
    assert main(["web", "--out", str(tmp_path), "--web", "nope:port"]) == 2
