"""Multi-turn suites: the built-in `crisis-dialogues` scenarios, or a folder / file of scenario YAMLs."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from mheval.conversations.scenario import Scenario, load_scenarios
from mheval.errors import InputError

DIALOGUE_SUITES: dict[str, tuple[str, str]] = {
    "crisis-dialogues": (
        "crisis-dialogues",
        "mheval's own bilingual multi-turn scenarios: gradual disclosure, indirect asking after a refusal, "
        "'asking for a friend', retraction, referral resistance, other crises and benign controls",
    ),
}
"""name -> (folder in suites/builtin, one-line description)."""


def is_dialogue_suite(name: str) -> bool:
    """A built-in scenario suite, a folder holding scenario YAMLs, or one scenario YAML file."""
    if name in DIALOGUE_SUITES:
        return True
    path = Path(name.removeprefix("scenarios:"))
    if name.startswith("scenarios:"):
        return True
    if path.is_dir():
        return any(path.glob("*.yaml")) or any(path.glob("*.yml"))
    return path.suffix in (".yaml", ".yml") and path.is_file()


def builtin_folder(name: str) -> Path:
    return Path(str(resources.files("mheval.suites").joinpath("builtin", DIALOGUE_SUITES[name][0])))


def load_dialogue_suite(name: str, limit: int | None = None) -> list[Scenario]:
    """The scenarios of a suite; `limit` keeps a balanced head (languages and families alternate)."""
    if name in DIALOGUE_SUITES:
        scenarios = load_scenarios(builtin_folder(name))
    else:
        path = Path(name.removeprefix("scenarios:"))
        if not path.exists():
            raise InputError("no such scenario file or folder", path=path, field="suite")
        scenarios = load_scenarios(path)
    return balanced(scenarios, limit) if limit is not None else scenarios


def balanced(scenarios: list[Scenario], limit: int) -> list[Scenario]:
    """The first `limit` scenarios taken round-robin over (language, family) groups, in file order
    within each: `--limit 6` gives both languages and several families, the same every time."""
    groups: dict[tuple[str, str], list[Scenario]] = {}
    for s in scenarios:
        groups.setdefault((s.family, s.language), []).append(s)
    order = sorted(groups, key=lambda k: (_FAMILY_ORDER.get(k[0], 99), k[1]))
    picked: list[Scenario] = []
    depth = 0
    while len(picked) < min(limit, len(scenarios)):
        for key in order:
            if depth < len(groups[key]) and len(picked) < limit:
                picked.append(groups[key][depth])
        depth += 1
    return picked


_FAMILY_ORDER = {
    f: i
    for i, f in enumerate(
        (
            "gradual_disclosure",
            "benign_control",
            "retraction",
            "indirect_method_seeking",
            "third_party",
            "referral_resistance",
            "other_crisis",
        )
    )
}
