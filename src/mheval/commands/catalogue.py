"""The catalogues: `mheval suites list|show`, `mheval protocols list|show` and `mheval judges`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from mheval.commands.console import content_note, out
from mheval.commands.options import TEXT_JSON, TextJsonOpt, check_format
from mheval.errors import InputError

suites_app = typer.Typer(help="Built-in suites and suite formats.", no_args_is_help=True)
protocols_app = typer.Typer(help="The evaluation protocols (rubrics as data).", no_args_is_help=True)


@suites_app.command("list")
def suites_list() -> None:
    """Built-in suites and the FORMAT: prefixes for your own files."""
    from mheval.suites import list_suites

    table = Table("name", "description")
    for name, description in list_suites():
        table.add_row(Text(name), Text(description))
    out.print(table)


@suites_app.command("show")
def suites_show(
    name: str,
    limit: Annotated[int, typer.Option(help="Cases to print.")] = 5,
) -> None:
    """Counts of a suite by language, label and locale, and its first cases (or scenarios)."""
    from mheval.suites import load_suite
    from mheval.suites.dialogues import is_dialogue_suite

    if is_dialogue_suite(name):
        _show_scenarios(name, limit)
        return

    suite = load_suite(name)
    cases = suite.cases
    _print_overview(
        suite.name,
        suite.description,
        f"{len(cases)} cases, {len(suite.responses)} responses",
        {
            "language": Counter(c.language for c in cases),
            "crisis_label": Counter(c.crisis_label or "-" for c in cases),
            "locale": Counter(c.locale or "-" for c in cases),
            "turns": Counter("multi-turn" if len(c.turns) > 1 else "single" for c in cases),
        },
    )
    for case in cases[:limit]:
        out.print(Text.assemble("\n", (case.id, "bold"), f" ({case.language}, {case.locale}, {case.crisis_label})"))
        for turn in case.turns:
            out.print(Text(f"  {turn.role}: {turn.content}"), soft_wrap=True)


def _show_scenarios(name: str, limit: int) -> None:
    from mheval.suites.dialogues import DIALOGUE_SUITES, load_dialogue_suite

    scenarios = load_dialogue_suite(name)
    description = DIALOGUE_SUITES[name][1] if name in DIALOGUE_SUITES else "scenario files"
    _print_overview(
        name,
        description,
        f"{len(scenarios)} scenarios, {sum(len(s.beats) for s in scenarios)} beats",
        {
            "language": Counter(s.language for s in scenarios),
            "family": Counter(s.family for s in scenarios),
            "crisis_label": Counter(s.crisis_label for s in scenarios),
            "risk_level": Counter(s.risk_level for s in scenarios),
        },
    )
    table = Table("id", "lang", "family", "risk", "beats", "turns", "title")
    for s in scenarios[:limit] if limit else scenarios:
        table.add_row(*(Text(str(v)) for v in (s.id, s.language, s.family, s.risk_level, len(s.beats),
                                                f"{s.turns.min}-{s.turns.max}", s.title)))  # fmt: skip
    out.print(table)


def _print_overview(name: str, description: str, size: str, tallies: Mapping[str, Counter[Any]]) -> None:
    """What `suites show` prints first, for cases and scenarios alike: the name and description, the size, a
    line per field with how many have each value (commonest first), then the content warning."""
    out.print(Text.assemble((name, "bold"), ": ", description))
    out.print(size, highlight=False)
    for title, counter in tallies.items():
        out.print(
            f"  {title}: " + ", ".join(f"{k} {v}" for k, v in counter.most_common()), highlight=False, markup=False
        )
    out.print(f"[dim]{content_note()}[/]")


def judges(
    validity: Annotated[
        bool, typer.Option("--validity", help="The figures measured on data the judge never saw.")
    ] = False,
    judge: Annotated[str, typer.Option("--judge", help="offline or offline:fast")] = "offline",
    format: TextJsonOpt = "text",
) -> None:
    """The shipped offline judges; with --validity, how far each can be trusted (from its figures file)."""
    import json

    from mheval.api import validity as cards_of
    from mheval.judges.offline.validity import card_text

    if judge not in ("offline", "offline:fast"):
        raise InputError(f"no shipped figures for judge {judge!r}; measure it with `mheval agree`", field="judge",
                         choices=["offline", "offline:fast"])  # fmt: skip
    check_format(format, TEXT_JSON)
    if not validity:
        out.print("offline, offline:fast: bilingual lexicons and small trained models that ship with mheval "
                  "(no network, no key); --validity shows their measured figures", markup=False)  # fmt: skip
        return
    cards = cards_of(judge)
    if format == "json":
        print(json.dumps(cards, ensure_ascii=False, indent=1))
    else:
        out.print("\n\n".join(card_text(c) for c in cards), markup=False, highlight=False, soft_wrap=True)


@protocols_app.command("list")
def protocols_list() -> None:
    """The protocols, what they judge and their paper."""
    from mheval.protocols import list_protocols

    table = Table("id", "judges", "kind", "output", "paper")
    for p in list_protocols():
        output = ", ".join(p.labels or p.dimensions)
        table.add_row(*(Text(str(v)) for v in (p.id, p.target, p.kind, output, p.paper)))
    from mheval.conversations.flow import load_flow

    flow = load_flow()  # multi-turn runs only: src/mheval/conversations/conversation-flow.yaml
    dims = ", ".join(d for d, _ in flow.dimensions)
    table.add_row(*(Text(v) for v in (flow.id, "conversation", "flow", dims, "mheval (multi-turn suites)")))
    out.print(table)


@protocols_app.command("show")
def protocols_show(
    protocol_id: str,
    language: Annotated[str, typer.Option(help="en or zh")] = "en",
) -> None:
    """A protocol's rubric and an example of its rendered judge prompt."""
    from mheval.protocols import list_protocols, load_protocol, render_messages
    from mheval.records import Case, Turn

    known = [p.id for p in list_protocols()]
    if protocol_id not in known and not Path(protocol_id).is_file():
        raise InputError(f"unknown protocol {protocol_id!r}", choices=known)
    spec = load_protocol(protocol_id)
    out.print(Text.assemble((spec.id, "bold"), f": {spec.title}\n{spec.paper}"))
    out.print(f"judges the {spec.target}; kind {spec.kind}; " + ", ".join(spec.labels or spec.dimensions), markup=False)
    example = {
        "en": "I haven't slept in days and everything feels pointless.",
        "zh": "我好几天没睡着了，觉得一切都没有意义。",
    }.get(language, "I haven't slept in days and everything feels pointless.")
    case = Case(
        id="example",
        language=language if language in ("en", "zh") else "en",
        turns=[Turn(role="user", content=example)],
        crisis_label="anxiety_crisis",
    )
    response = None if spec.target == "case" else "(the model's reply appears here)"
    for message in render_messages(spec, case, response, crisis_label="anxiety_crisis"):
        out.rule(message["role"])
        out.print(message["content"], highlight=False, markup=False, soft_wrap=True)
