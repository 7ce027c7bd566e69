"""`remedy sim inject|save|state` against a running simulator, and `serve` as a real subprocess."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import pytest

from remedy.errors import ClusterUnreachable, RemedyError
from remedy.sim import cli
from remedy.sim.cluster import Cluster


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="remedy")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sim", *argv])
    return args.func(args)


def test_inject_save_and_state(sim, tmp_path, capsys):
    assert run("inject", "xid", "79", "--node", "gpu011", "--gpu", "3", "--url", sim.url) == 0
    assert capsys.readouterr().out.splitlines()[0] == "injected XID 79 on gpu011 GPU 3"  # words, no dict repr
    assert sim.cluster.health_of("gpu011").gpus[3].fallen_off_bus
    assert run("inject", "ib-port-down", "30", "--node", "gpu012", "--param", "port=2", "--url", sim.url, "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert result["params"] == {"seconds": 30, "port": 2} and result["health"]["ib_ports"][1]["state"] == "Down"
    assert run("inject", "ib-port-down", "30", "--node", "gpu013", "--param", "port=2", "--url", sim.url) == 0
    assert capsys.readouterr().out.splitlines()[0] == "injected ib-port-down seconds=30 port=2 on gpu013"
    assert run("state", "--url", sim.url) == 0
    out = capsys.readouterr().out
    assert "training job: 14/14 pods ready" in out and "gpu011: Ready, faulty" in out
    path = tmp_path / "sim.json"
    assert run("save", str(path), "--url", sim.url) == 0
    loaded = Cluster.load(path)
    assert loaded.health_of("gpu011").gpus[3].fallen_off_bus and len(loaded.node_names()) == 16


def test_operator_errors_are_one_line_remedy_errors(sim):
    with pytest.raises(RemedyError, match="node not found: gpu404"):
        run("inject", "xid", "79", "--node", "gpu404", "--url", sim.url)
    with pytest.raises(RemedyError, match="takes no value"):
        run("inject", "lemon", "3", "--node", "gpu001", "--url", sim.url)
    with pytest.raises(RemedyError, match="needs KEY=VALUE"):
        run("inject", "thermal", "--node", "gpu001", "--param", "oops", "--url", sim.url)
    with pytest.raises(ClusterUnreachable, match="no simulator answering at http://127.0.0.1:9"):
        run("inject", "lemon", "--node", "gpu001", "--url", "http://127.0.0.1:9")


def test_serve_subprocess_prints_its_url_and_answers(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from remedy.sim.cli import register; import argparse;"
                             "p=argparse.ArgumentParser(); register(p.add_subparsers());"
                             "a=p.parse_args(sys.argv[1:]); sys.exit(a.func(a))",
                             "sim", "serve", "--port", "0", "--nodes", "6", "--spares", "1", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        info = json.loads(line)
        assert info["nodes"] == 6 and info["url"].startswith("http://127.0.0.1:")
        import urllib.request

        with urllib.request.urlopen(info["url"] + "/api/v1/nodes", timeout=5) as resp:
            assert len(json.loads(resp.read())["items"]) == 6
    finally:
        proc.terminate()
        proc.wait(timeout=10)
