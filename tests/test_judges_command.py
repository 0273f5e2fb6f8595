"""`mheval judges`: its --format is the shared text-or-json option (commands/options.py TextJsonOpt), so it takes
-f like every other command, and a bad value is refused with the choices."""

from __future__ import annotations

import json

import pytest

from cli_inprocess import mheval as cli
from mheval import api


@pytest.mark.parametrize("flag", ["--format", "-f"])
def test_json_cards_are_the_apis_validity_cards(flag):
    shown = cli("judges", "--validity", "--judge", "offline:fast", flag, "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == json.loads(json.dumps(api.validity("offline:fast"), ensure_ascii=False))


def test_an_unknown_format_is_refused_with_the_choices():
    shown = cli("judges", "--validity", "-f", "xml")
    assert shown.exit_code == 2 and "unknown format 'xml'" in shown.stderr and "text, json" in shown.stderr
