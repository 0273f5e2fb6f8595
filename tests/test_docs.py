"""The README and docs/ describe the software as it is, and quote only crisis lines mheval's table holds.

- Every crisis line the README and docs/ quote (a bold number in Markdown, any number inside a content-warning
  block, any number inside a template's `class="warning"` block) is a number of
  `src/mheval/resources/crisis_lines.yaml` (a service's voice or text number, or an emergency number).
- Each line of the README's content warning is a line of the table *for the country it is listed under*, and its
  "elsewhere" address is one of the table's international directories.
- The content warnings of the report, the summary, the CLI and the rating server hold no numbers of their own
  (no number in a `*WARNING*` / `CONTENT_*` constant): they take them from the table (mheval.resources
  .warning_lines), whose lines are checked here as the README's are.
- No work-log wording: "this session", "the previous session's tree", "this round", commit hashes and the like
  belong in commit messages and issues, not in pages that describe the software.
- Every relative link from the README and docs/ points at a file that exists.

The data file is read with PyYAML directly: only the check of the code's warning lines imports the package.
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
    ROOT / "src" / "mheval" / "reporting" / "summary.py",
    ROOT / "src" / "mheval" / "reporting" / "html.py",
    ROOT / "src" / "mheval" / "cli.py",
    ROOT / "src" / "mheval" / "commands" / "console.py",
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


def table_lines() -> dict[str, tuple[str, set[str]]]:
    """Country code -> (the country's name, the digits of its services' voice and text numbers)."""
    data = yaml.safe_load(CRISIS_LINES.read_text(encoding="utf-8"))
    return {
        str(code): (
            country["name"],
            {digits(n) for s in country["services"] for n in [*s.get("numbers", []), *s.get("text", [])]},
        )
        for code, country in data["countries"].items()
    }


def place_words(place: str) -> frozenset[str]:
    """A place's words, so "Mainland China" is the table's "China (mainland)"."""
    return frozenset(re.findall(r"\w+", place.lower()))


def countries_named(place: str) -> list[str]:
    """The country codes a warning line is listed under: "United Kingdom and Ireland" -> GB, IE."""
    by_words = {place_words(name): code for code, (name, _) in table_lines().items()}
    return [by_words.get(place_words(part), part) for part in re.split(r",\s*|\s+and\s+", place)]


def readme_warning() -> list[str]:
    """The list items of the README's content-warning blockquote, "Place: ... **number** ..."."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^> \*\*Content warning\.\*\*.*?(?=^[^>])", text, flags=re.M | re.S)
    assert block, "the README has no content warning"
    return [line[4:] for line in block.group(0).splitlines() if line.startswith("> - ")]


def test_each_readme_warning_line_is_a_line_of_its_country() -> None:
    items = readme_warning()
    lines = table_lines()
    wrong = []
    for item in items:
        place, _, rest = item.partition(":")
        for number in BOLD.findall(rest):
            for code in countries_named(place):
                if code not in lines or digits(number) not in lines[code][1]:
                    wrong.append(f"{place}: {number} (not a line of {code} in crisis_lines.yaml)")
    assert not wrong, wrong
    numbers = [digits(n) for item in items for n in BOLD.findall(item)]
    assert {"988", "116123", "131114", "12356"} <= set(numbers), numbers  # the check read the list


def test_the_readme_warning_points_to_a_directory_of_the_table() -> None:
    data = yaml.safe_load(CRISIS_LINES.read_text(encoding="utf-8"))
    directories = {i["url"].rstrip("/") for i in data["international"]}
    urls = [u.rstrip("/") for item in readme_warning() for u in re.findall(r"<(https://[^>]+)>", item)]
    assert urls and set(urls) <= directories, urls


def test_the_country_check_catches_a_wrong_country() -> None:
    assert countries_named("United Kingdom and Ireland") == ["GB", "IE"]
    assert countries_named("Mainland China") == ["CN"]
    assert digits("2389 2222") not in table_lines()["TW"][1]
    assert digits("2389 2222") in table_lines()["HK"][1]


def test_the_code_warnings_hold_no_numbers() -> None:
    quoted = {str(path.relative_to(ROOT)): code_quotes(path) for path in WARNING_CODE if path.exists()}
    assert not any(quoted.values()), f"take the lines from mheval.resources.warning_lines: {quoted}"


def test_the_code_check_finds_a_literal(tmp_path: Path) -> None:
    source = tmp_path / "warning.py"
    source.write_text('WARNING_LINES = (("United States", "988", "Lifeline"),)\nCONTENT_NOTE = "call 116 123"\n')
    assert code_quotes(source) == ["988", "116 123"]


def test_the_code_warning_lines_are_lines_of_their_countries() -> None:
    from mheval.resources import warning_lines

    lines = table_lines()
    shown = warning_lines()
    assert [line.codes for line in shown] == [("US",), ("GB", "IE"), ("AU",), ("CN",), ()]
    for line in shown:
        for code in line.codes:
            assert digits(line.number) in lines[code][1], (code, line.number)
    data = yaml.safe_load(CRISIS_LINES.read_text(encoding="utf-8"))
    assert f"https://{shown[-1].number}" in {i["url"].rstrip("/") for i in data["international"]}


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
