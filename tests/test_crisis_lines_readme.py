"""Crisis lines have one owner, src/mheval/resources/crisis_lines.yaml: the README's content warning agrees with
it (read only; the README is written by hand), and every warning mheval shows is made from it, in English and
in Chinese."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mheval.annotate.server import warning_lines_for
from mheval.errors import InputError
from mheval.resources import digits, load_crisis_lines, parse_crisis_lines, warning_lines

README = Path(__file__).resolve().parent.parent / "README.md"
BOLD = re.compile(r"\*\*([^*]+)\*\*")
LINK = re.compile(r"<https://([^>]+)>")


def _warning_bullets() -> list[tuple[str, str]]:
    """(place, rest of the line) of each bullet of the README's content warning."""
    text = README.read_text(encoding="utf-8")
    block = text.split("**Content warning.**", 1)[1].split("\n\n", 1)[0]
    bullets = [line[len("> - ") :] for line in block.splitlines() if line.startswith("> - ")]
    assert bullets, "the README's content warning lists no lines"
    return [(place.strip(), rest.strip()) for place, rest in (b.split(":", 1) for b in bullets)]


def _words(name: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z]+", name.lower()))


def _countries(place: str) -> list[str]:
    """The country codes a README place names ("United Kingdom and Ireland" -> GB, IE), by the file's names."""
    by_words = {_words(c.name): code for code, c in load_crisis_lines().countries.items()}
    codes = [by_words.get(_words(part)) for part in place.split(" and ")]
    assert all(codes), f"the README names a place the crisis-line file does not have: {place!r}"
    return [c for c in codes if c]


def test_every_number_in_the_readme_warning_is_a_line_of_that_country_in_the_file():
    lines = load_crisis_lines()
    for place, rest in _warning_bullets():
        if place == "Elsewhere":
            assert set(LINK.findall(rest)) <= {i.url.removeprefix("https://").rstrip("/") for i in lines.international}
            continue
        numbers = BOLD.findall(rest)
        assert numbers, f"no number on the README's line for {place}"
        for code in _countries(place):
            listed = {digits(n) for s in lines.countries[code].services for n in (*s.numbers, *s.text)}
            for number in numbers:
                assert digits(number) in listed, f"README: {place} {number} is not a line of {code} in the file"


def test_every_line_a_content_warning_shows_is_in_the_readme():
    bullets = {tuple(_countries(place)) if place != "Elsewhere" else (): rest for place, rest in _warning_bullets()}
    for line in warning_lines():
        assert line.codes in bullets, f"the README's content warning has no line for {line.place}"
        shown = bullets[line.codes]
        assert (f"**{line.number}**" if line.codes else f"<https://{line.number}>") in shown, line


def test_the_readme_counts_the_countries_of_the_file():
    said = re.search(r"crisis_lines\.yaml` \((\d+) countries\)", README.read_text(encoding="utf-8"))
    assert said is not None and int(said.group(1)) == len(load_crisis_lines().countries)


def test_a_chinese_rating_page_shows_the_files_chinese_names_and_its_numbers():
    zh, en = warning_lines_for("zh"), warning_lines_for("en")
    assert [number for _, number, _ in zh] == [line.number for line in warning_lines()] == [n for _, n, _ in en]
    countries = load_crisis_lines().countries
    first = countries["US"].services[0]
    assert zh[0] == (countries["US"].name_zh, "988", f"{first.name_zh}，可致电或发短信")
    assert zh[1][0] == f"{countries['GB'].name_zh}和{countries['IE'].name_zh}"  # two countries, one number
    assert en[0] == ("United States", "988", f"{first.name}, call or text")


def test_a_line_without_chinese_names_is_shown_in_english_on_a_chinese_page():
    raw = {
        "countries": {
            code: {"name": name, "calling_code": "1", "services": [{"name": f"{name} line", "numbers": [number],
                   "hours": "24/7", "url": "https://example.org", "verified_on": ""}]}
            for code, name, number in (("US", "United States", "988"), ("GB", "United Kingdom", "116 123"),
                                       ("IE", "Ireland", "116 123"), ("AU", "Australia", "13 11 14"),
                                       ("CN", "China (mainland)", "12356"))
        },
        "international": [{"name": "Directory", "url": "https://directory.example"}],
    }  # fmt: skip
    raw["countries"]["CN"]["name_zh"] = "中国大陆"
    raw["countries"]["CN"]["services"][0]["name_zh"] = "热线"
    lines = warning_lines(parse_crisis_lines(raw))
    assert lines[0].in_language("zh") == ("United States", "988", "United States line")
    assert lines[1].in_language("zh")[0] == "United Kingdom and Ireland"
    assert lines[3].in_language("zh") == ("中国大陆", "12356", "热线")
    assert lines[-1].in_language("zh") == ("其他地区", "directory.example", "或当地紧急电话")
    raw["countries"]["CN"]["name_zh"] = " "
    with pytest.raises(InputError, match="name_zh"):
        parse_crisis_lines(raw)


def _warning_quotes(text: str) -> list[str]:
    """The block quotes (runs of "> " lines) of a page that are content warnings."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith(">"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    quotes = ["\n".join(b) for b in blocks if b]
    return [q for q in quotes if "content warning" in q.lower()]


@pytest.mark.parametrize("page", [README, *sorted((README.parent / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_number_a_content_warning_of_the_docs_gives_is_in_the_file(page: Path):
    """Every number written in bold in a content warning of the README or a docs page is a line of the file
    (of some country: the pages name the country in prose), and every address one links is one of its directories."""
    lines = load_crisis_lines()
    numbers = {digits(n) for c in lines.countries.values() for s in c.services for n in (*s.numbers, *s.text)}
    directories = {i.url.removeprefix("https://").rstrip("/") for i in lines.international}
    for quote in _warning_quotes(page.read_text(encoding="utf-8")):
        for number in BOLD.findall(quote):
            if digits(number):
                assert digits(number) in numbers, f"{page.name}: {number} is not a line of crisis_lines.yaml"
        for address in LINK.findall(quote):
            assert address.rstrip("/") in directories, f"{page.name}: {address} is not a directory of the file"
