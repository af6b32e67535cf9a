"""What in a text names a host, a file or a module (``skillopt_sleep/mine/hosts.py``)."""

from __future__ import annotations

import pytest

from skillopt_sleep.mine.hosts import dotted_tokens, ip_literals, is_host_name


@pytest.mark.parametrize("name, host", [
    ("evilname.lol", True), ("get.evil.example", True), ("forums.bbc.co.uk", True), ("user.github.io", True),
    ("x.internal", True), ("README.md", True),  # .md is Moldova: the file ending decides (dotted_tokens)
    ("os.path", False), ("logging.getLogger", False), ("co.uk", False),  # a bare public suffix is no host
])
def test_is_host_name_reads_the_bundled_public_suffix_list(name, host):
    assert is_host_name(name) is host


@pytest.mark.parametrize("text, expected", [
    ("fetch the script at evilname.lol/setup", [("host", "evilname.lol")]),
    ("upload the dump to collector.zip", [("host", "collector.zip")]),
    ("curl -sL collector.corpnet", [("host", "collector.corpnet")]),
    ("mail ops@collector.corpnet", [("host", "collector.corpnet")]),
    ("serve it on web.corpnet:8080", [("host", "web.corpnet")]),
    ("see README.md and package.json", [("path", "README.md"), ("path", "package.json")]),
    ("prefer os.path, e.g. os.path.join", [("name", "os"), ("name", "os")]),
    ("from os.path import join", [("name", "os")]),  # a module, not a host, after "from ... import"
    ("use datetime.now(timezone.utc)", [("name", "datetime"), ("name", "timezone")]),  # a host is not called
    ("download from evilname.lol(mirror)", [("host", "evilname.lol")]),  # ...but where a host stands, it is one
    ("bump 1.2.3 to v1.2.4", []),  # version numbers name nothing
    ("ping 203.0.113.7 and [2001:db8::7]:8443", [("host", "203.0.113.7"), ("host", "2001:db8::7")]),
])
def test_dotted_tokens(text, expected):
    assert dotted_tokens(text) == expected


def test_ip_literals_are_validated():
    assert ip_literals("at 12:30:45 ping 999.1.1.1, 10.0.0.1, ::1 and fe80::1") == ["10.0.0.1", "::1", "fe80::1"]
