"""The README and docs/ describe the software as it is, and quote only crisis lines mheval's table holds.

- Every crisis line the README, docs/ and the content warnings of the report, the summary, the CLI and the rating
  server quote (a bold number in Markdown, any number inside a content-warning block, the number fields of the
  `*WARNING*` / `CONTENT_*` tables in the code, any number inside a template's `class="warning"` block) is a
  number of `src/mheval/resources/crisis_lines.yaml` (a service's voice or text number, or an emergency number).
- No work-log wording: "this session", "the previous session's tree", "this round", commit hashes and the like
  belong in commit messages and issues, not in pages that describe the software.
- Every relative link from the README and docs/ points at a file that exists.

The data file is read with PyYAML directly: this test needs nothing from the package.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CRISIS_LINES = ROOT / "src" / "mheval" / "resources" / "crisis_lines.yaml"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Code that writes a content warning with numbers (the tables are read by the report and rating templates).
WARNING_CODE = [
    ROOT / "src" / "mheval" / "resources" / "__init__.py",
    ROOT / "src" / "mheval" / "annotate" / "server.py",
    ROOT / "src" / "mheval" / "report" / "summary.py",
    ROOT / "src" / "mheval" / "report" / "html.py",
    ROOT / "src" / "mheval" / "cli.py",
]
TEMPLATES = sorted((ROOT / "src" / "mheval").glob("*/templates/*.j2"))

# A phone number as people write it: digits, with single spaces, hyphens or brackets between groups.
NUMBER = re.compile(r"(?<![\w/:-])(?<!\d[.,])\(?\d[\d()]*(?:[ -]\(?\d[\d()]*)*(?![\w/:-]|[.,]\d)")
BOLD = re.compile(r"\*\*([^*]+)\*\*")


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def known_numbers() -> set[str]:
    data = yaml.safe_load(CRISIS_LINES.read_text(encoding="utf-8"))
    found: set[str] = set()
    for country in data["countries"].values():
        found.update(digits(n) for n in country.get("emergency", []))
        for service in country.get("services", []):
            found.update(digits(n) for n in [*service.get("numbers", []), *service.get("text", [])])
    return found


def phone_numbers(text: str) -> list[str]:
    """Numbers of three digits or more (shorter ones are list markers, counts and the like)."""
    return [m.group(0) for m in NUMBER.finditer(text) if len(digits(m.group(0))) >= 3]


def markdown_quotes(path: Path) -> list[str]:
    """The crisis lines a page quotes: bold numbers, and every number inside a content-warning blockquote."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold commands, not lines to call
    quoted = [b.strip() for b in BOLD.findall(text) if NUMBER.fullmatch(b.strip()) and len(digits(b)) >= 3]
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith(">"):
            block.append(line.lstrip("> "))
            continue
        joined = " ".join(block)
        if re.search(r"content warning", joined, re.I):
            quoted += phone_numbers(re.sub(r"<[^>]+>|\(arXiv [^)]*\)", "", joined))
        block = []
    return quoted


def code_quotes(path: Path) -> list[str]:
    """Numbers in the string constants of module-level `*WARNING*` and `CONTENT_*` assignments."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    quoted: list[str] = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        value = getattr(node, "value", None)
        if value is None or not any("WARNING" in n or n.startswith("CONTENT_") for n in names):
            continue
        for const in ast.walk(value):
            if isinstance(const, ast.Constant) and isinstance(const.value, str):
                quoted += phone_numbers(const.value)
    return quoted


def template_quotes(path: Path) -> list[str]:
    """Numbers written inside a template's `class="warning"` element (the tables above fill the rest)."""
    text = path.read_text(encoding="utf-8")
    quoted: list[str] = []
    for m in re.finditer(r'class="warning".*?</(aside|section|div)>', text, flags=re.S):
        plain = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|<[^>]+>", " ", m.group(0))
        quoted += phone_numbers(plain)
    return quoted


def test_the_readme_warning_quotes_lines() -> None:
    quoted = {digits(n) for n in markdown_quotes(ROOT / "README.md")}
    assert {"988", "116123", "12356"} <= quoted, quoted


def test_the_code_warnings_are_found() -> None:
    quoted = {digits(n) for path in WARNING_CODE if path.exists() for n in code_quotes(path)}
    assert "988" in quoted, quoted


@pytest.mark.parametrize("path", PAGES + WARNING_CODE + TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_crisis_lines_are_in_the_table(path: Path) -> None:
    if not path.exists():
        pytest.skip("moved")
    if path.suffix == ".md":
        quoted = markdown_quotes(path)
    elif path.suffix == ".py":
        quoted = code_quotes(path)
    else:
        quoted = template_quotes(path)
    known = known_numbers()
    unknown = sorted({n for n in quoted if digits(n) not in known})
    assert not unknown, f"{path.relative_to(ROOT)} quotes numbers that crisis_lines.yaml does not hold: {unknown}"


# Work-log wording: what a page must not say about how it came to be.
FORBIDDEN = [
    r"\bthis session\b",
    r"\b(?:previous|last|earlier|next|other) session",
    r"\bsession's (?:final )?tree\b",
    r"\bthis round\b",
    r"\b(?:previous|last|next) round\b",
    r"\bround \d+\b",
    r"\b(?:this|the final|the previous) tree\b",
    r"\bnot re-measured\b",
    r"\bon commit\b",
]
# A commit hash: 7-40 hex digits with at least one letter and one digit, not part of a longer name
# (a run folder such as `runs/crisis-core-1a2b3c4d` is the software's own naming, not a commit).
COMMIT = re.compile(r"(?<![\w/-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")
# Pages another engineer owns that still carry such wording: debt, to remove when the page is fixed.
KNOWN_WORDING: set[tuple[str, str]] = set()


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_work_log_wording(path: Path) -> None:
    name = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    found = [
        f"{pattern}: {m.group(0)!r}"
        for pattern in FORBIDDEN
        if (name, pattern) not in KNOWN_WORDING
        for m in re.finditer(pattern, text, flags=re.I)
    ]
    found += [f"commit hash: {m.group(0)!r}" for m in COMMIT.finditer(text)]
    assert not found, f"{name} describes its own history; say what the software is and does: {found}"


def test_the_wording_check_catches_a_work_log() -> None:
    sample = "Measured on the previous session's tree (commit fc737c4), not re-measured this session."
    assert any(re.search(p, sample, flags=re.I) for p in FORBIDDEN)
    assert COMMIT.search(sample)
    assert not COMMIT.search("mheval summary runs/crisis-core-1a2b3c4d")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path: Path) -> None:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)} links to files that do not exist: {broken}"
