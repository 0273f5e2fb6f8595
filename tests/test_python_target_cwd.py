"""`--model python:mybot:reply` with mybot.py in the current folder (docs/app-targets.md) imports it, as
`python -m` would, from the `mheval` command as from Python; an installed module of the same name wins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mheval.models.python_target import load_callable, parse_python_spec

BOT = "def reply(messages):\n    return 'I am here with you. Are you safe right now?'\n"


@pytest.fixture
def clean_imports(monkeypatch):
    """sys.path and sys.modules as the `mheval` console script has them: no current folder on the path, and no
    `mybot` imported by another test of the same worker (monkeypatch puts such a module back afterwards). A
    folder another test ran a `mybot` from is on the path too (a module found in the current folder keeps its
    folder on the path, as `python -m` does): it is left out, or its mybot would be found first."""

    def other_bots(entry: str) -> bool:
        return entry in ("", ".") or any((Path(entry) / name).exists() for name in ("mybot.py", "mybot_pkg"))

    monkeypatch.setattr(sys, "path", [p for p in sys.path if not other_bots(p)])
    for name in [n for n in sys.modules if n.split(".")[0] in ("mybot", "mybot_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] in ("mybot", "mybot_pkg"):
            del sys.modules[name]


@pytest.mark.parametrize(("spec", "files"), [
    ("python:mybot:reply", {"mybot.py": BOT}),
    ("python:mybot_pkg.chat:reply", {"mybot_pkg/__init__.py": "", "mybot_pkg/chat.py": BOT}),
])  # fmt: skip
def test_a_module_in_the_current_folder_is_a_target(tmp_path, monkeypatch, clean_imports, spec, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    fn = load_callable(parse_python_spec(spec))
    assert fn([{"role": "user", "content": "hi"}]).startswith("I am here")


def test_the_current_folder_never_shadows_an_installed_module(tmp_path, monkeypatch, clean_imports):
    (tmp_path / "json.py").write_text("def dumps(x):\n    return 'shadowed'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_callable(parse_python_spec("python:json:dumps"))([1]) == "[1]"
