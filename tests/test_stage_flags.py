"""The stage commands (run, triage, generate, judge) take their flags from one table (commands/options.STAGE_FLAGS):
each command offers the flags it names, in the table's order, and refuses the others."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from cli_inprocess import mheval
from mheval.cli import app
from mheval.commands.options import STAGE_FLAGS, takes_flags


def _params(command: str) -> list[str]:
    click_app = typer.main.get_command(app)
    return [p.name for p in click_app.commands[command].params]  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["run", "triage", "generate", "judge"])
def test_flags_follow_the_table_order(command):
    names = _params(command)
    assert names, command
    assert set(names) <= STAGE_FLAGS.keys()
    table_order = [n for n in STAGE_FLAGS if n in names]
    assert names == table_order


def test_each_command_offers_what_its_stages_read():
    run, triage, generate, judge = (set(_params(c)) for c in ("run", "triage", "generate", "judge"))
    assert run == STAGE_FLAGS.keys() - {"responses"}  # run makes its own replies
    assert {"model", "samples", "max_tokens"} <= generate and not generate & {"judge", "protocol", "redact"}
    assert {"judge", "repeats", "redact"} <= triage and not triage & {"model", "protocol", "responses"}
    assert {"responses", "protocol", "roles"} <= judge and not judge & {"model", "samples", "simulator"}


def test_a_flag_the_command_does_not_take_is_refused(tmp_path):
    refused = mheval("triage", "--suite", "crisis-core", "--model", "openai/gpt-4o-mini", "--out", tmp_path / "r")
    assert refused.returncode == 2
    assert "--model" in refused.stderr
    assert not (tmp_path / "r").exists()


def test_defaults_reach_the_command():
    seen: dict[str, object] = {}

    @takes_flags("quiet", "limit")
    def probe(**flags: object) -> None:
        seen.update(flags)

    probe_app = typer.Typer()
    probe_app.command()(probe)
    probe_app.command("other")(lambda: None)  # two commands, so typer keeps the command name
    result = CliRunner().invoke(probe_app, ["probe", "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert seen == {"quiet": False, "limit": 3}


def test_an_unknown_flag_name_is_a_mistake_at_import():
    with pytest.raises(ValueError, match="not stage flags"):
        takes_flags("config", "modle")
