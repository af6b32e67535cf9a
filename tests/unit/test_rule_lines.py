"""benchmarks/rule_lines.py: each candidate line is written into the world's memory beside the other lines, and the
rule's probes are scored against an OpenAI-compatible server on 127.0.0.1 (here a stand-in that follows a line only
when it names the command)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from benchmarks import rule_lines, world2
from skillopt_sleep.documents.block import managed_block


class _Follows(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        system = body["messages"][0]["content"]
        text = "Run `uv add requests-cache`." if "`uv add`" in system else "Run `pip install requests-cache`."
        reply = json.dumps({"choices": [{"message": {"content": text}}], "usage": {}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


@pytest.fixture()
def server():
    httpd = HTTPServer(("127.0.0.1", 0), _Follows)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def test_the_lines_go_into_the_managed_block_beside_the_others():
    memory = rule_lines.memory_with(world2, ["- Use `uv add`, never `pip`.", "- Use `logger`, never `print`."])
    assert managed_block(memory).splitlines()[-2:] == ["- Use `uv add`, never `pip`.", "- Use `logger`, never `print`."]


def test_each_line_is_scored_on_the_rules_probes(server, tmp_path, capsys):
    out = tmp_path / "lines.json"
    rule_lines.main(["--world", "2", "--rule", "uv", "--night", "4", "--base-url", server, "--json", str(out),
                     "--line", "plain=- Use `uv`, never `pip`.", "--line", "command=- Use `uv add`, never `pip`."])
    results = json.loads(out.read_text())
    probes = sum(1 for probe in world2.PROBES if probe.rule == "uv")
    assert results["plain"]["passed"] == f"0/{probes}" and results["command"]["passed"] == f"{probes}/{probes}"
    assert "| command: `- Use `uv add`, never `pip`.` |" in capsys.readouterr().out


def test_a_rule_the_world_does_not_have_is_refused(server):
    with pytest.raises(SystemExit, match="no probes of rule 'yarn'"):
        rule_lines.main(["--world", "2", "--rule", "yarn", "--base-url", server, "--line", "x=- Use yarn."])
