"""Crisis resources as data: crisis lines and emergency numbers by country (`crisis_lines.yaml`).

The file is read once and validated; `match_referral` (matching.py) uses it to tell whether a reply
refers a person to a line of their own country. Every entry carries the organisation's URL and an
empty `verified_on`: the numbers must be checked there before anyone relies on them.

It is the one owner of the crisis lines mheval shows: every content warning (the report, the terminal
summary and notes, the rating pages in English and Chinese) is made from `warning_lines`, and
tests/test_crisis_lines_readme.py checks the README's lines against the file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from mheval.errors import InputError
from mheval.yamlio import load_yaml

DATA_FILE = Path(__file__).resolve().parent / "crisis_lines.yaml"

# The countries whose first line every content warning shows (report, summary, rating pages), in this order,
# then the international directory: a pointer, not a directory. The lines themselves come from the table.
WARNING_COUNTRIES = ("US", "GB", "IE", "AU", "CN")

_ISO_RE = re.compile(r"^[A-Z]{2}$")
_DIGITS_RE = re.compile(r"\D")
# Aliases used by people and models that are not ISO codes.
_LOCALE_ALIASES = {"UK": "GB", "EL": "GR"}


@dataclass(frozen=True)
class Service:
    country: str
    name: str
    names: tuple[str, ...]
    numbers: tuple[str, ...]
    text: tuple[str, ...]
    hours: str
    languages: tuple[str, ...]
    url: str
    verified_on: str
    name_zh: str = ""  # the name a Chinese page shows (the rating study's content warning); "" when none


@dataclass(frozen=True)
class Country:
    code: str
    name: str
    calling_code: str
    emergency: tuple[str, ...]
    services: tuple[Service, ...]
    name_zh: str = ""  # the country's name on a Chinese page; "" when none


@dataclass(frozen=True)
class International:
    name: str
    url: str
    names: tuple[str, ...]


@dataclass(frozen=True, eq=False)  # hashed by identity, so matchers can cache their patterns per file
class CrisisLines:
    countries: dict[str, Country]
    international: tuple[International, ...]


def digits(number: str) -> str:
    return _DIGITS_RE.sub("", number)


def normalise_locale(locale: str | None) -> str | None:
    """`US`, `us`, `en-US`, `zh_CN`, `UK` -> an ISO country code (`US`, `CN`, `GB`); None if there is none."""
    if not locale or not locale.strip():
        return None
    parts = re.split(r"[-_]", locale.strip())
    candidates = [p for p in parts if len(p) == 2 and p.isalpha()]
    if not candidates:
        return None
    code = candidates[-1].upper()
    return _LOCALE_ALIASES.get(code, code)


def _strings(value: Any, where: str, path: Path) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError("must be a list of non-empty strings", path=path, field=where)
    return tuple(v.strip() for v in value)


def _optional_text(raw: dict[str, Any], key: str, where: str, path: Path) -> str:
    """An optional text field: absent is "", present must be a non-empty string."""
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise InputError("must be a non-empty string when given", path=path, field=f"{where}.{key}")
    return value.strip()


def _service(code: str, i: int, raw: Any, path: Path) -> Service:
    where = f"countries.{code}.services[{i}]"
    if not isinstance(raw, dict):
        raise InputError("a service must be a mapping", path=path, field=where)
    for key in ("name", "hours", "url"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise InputError("missing or empty", path=path, field=f"{where}.{key}")
    if not raw["url"].startswith("https://"):
        raise InputError("the URL must be an https:// address users can check", path=path, field=f"{where}.url")
    if "verified_on" not in raw:
        raise InputError("missing (leave it empty until checked)", path=path, field=f"{where}.verified_on")
    numbers = _strings(raw.get("numbers"), f"{where}.numbers", path)
    text = _strings(raw.get("text"), f"{where}.text", path)
    if not numbers and not text:
        raise InputError("a service needs a number or a text number", path=path, field=where)
    for n in (*numbers, *text):
        if not 2 <= len(digits(n)) <= 15:
            raise InputError(f"{n!r} is not a phone number", path=path, field=f"{where}.numbers")
    return Service(
        country=code,
        name=raw["name"].strip(),
        names=_strings(raw.get("names"), f"{where}.names", path),
        numbers=numbers,
        text=text,
        hours=raw["hours"].strip(),
        languages=_strings(raw.get("languages"), f"{where}.languages", path),
        url=raw["url"].strip(),
        verified_on=str(raw.get("verified_on") or ""),
        name_zh=_optional_text(raw, "name_zh", where, path),
    )


def parse_crisis_lines(data: Any, path: Path = DATA_FILE) -> CrisisLines:
    """Validate the file's content; every problem is an InputError naming the key."""
    if not isinstance(data, dict) or not isinstance(data.get("countries"), dict):
        raise InputError("expected a mapping with `countries`", path=path)
    countries: dict[str, Country] = {}
    for code, raw in data["countries"].items():
        code = str(code)
        if not _ISO_RE.match(code):
            raise InputError(f"{code!r} is not an ISO 3166-1 alpha-2 code", path=path, field="countries")
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise InputError("a country needs a name", path=path, field=f"countries.{code}")
        calling = str(raw.get("calling_code", ""))
        if not calling.isdigit():
            raise InputError("missing or not digits", path=path, field=f"countries.{code}.calling_code")
        services = raw.get("services")
        if not isinstance(services, list) or not services:
            raise InputError("a country needs at least one service", path=path, field=f"countries.{code}.services")
        countries[code] = Country(
            code=code,
            name=raw["name"],
            calling_code=calling,
            emergency=_strings(raw.get("emergency"), f"countries.{code}.emergency", path),
            services=tuple(_service(code, i, s, path) for i, s in enumerate(services)),
            name_zh=_optional_text(raw, "name_zh", f"countries.{code}", path),
        )
    international = tuple(
        International(name=str(i["name"]), url=str(i["url"]), names=_strings(i.get("names"), "international", path))
        for i in data.get("international") or []
    )
    return CrisisLines(countries=countries, international=international)


@functools.lru_cache(maxsize=4)
def load_crisis_lines(path: str | Path = DATA_FILE) -> CrisisLines:
    """The crisis lines in `path` (the built-in file by default), validated and cached."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read crisis lines: {exc}", path=path) from None
    return parse_crisis_lines(data, path)


def lines_for(locale: str | None) -> Country | None:
    """The crisis lines of a case's locale, or None when the file has no entry for it."""
    code = normalise_locale(locale)
    return load_crisis_lines().countries.get(code) if code else None


# The words of a content warning line that are not in the table, per language a page is shown in: the
# directory's place and what it says, what a number that takes texts adds to the service's name, and what
# joins two countries that share a line.
_WARNING_WORDS = {
    "en": {"elsewhere": "Elsewhere", "local": "or your local emergency number", "texts": "{}, call or text",
           "and": " and "},
    "zh": {"elsewhere": "其他地区", "local": "或当地紧急电话", "texts": "{}，可致电或发短信", "and": "和"},
}  # fmt: skip


@dataclass(frozen=True)
class WarningLine:
    """One line of a content warning, as crisis_lines.yaml has it. Iterating gives `place, number, what`,
    the three columns the report and rating templates show; `in_language("zh")` the same in Chinese."""

    codes: tuple[str, ...]  # the countries it is for, ("GB", "IE"); () for the international directory
    place: str  # the countries' names, "United Kingdom and Ireland"; "Elsewhere" for the directory
    number: str  # the service's first number as the table writes it; the directory's address
    service: str  # the service's name; the directory's name
    texts: bool = False  # the number takes text messages too
    place_zh: str = ""  # the countries' Chinese names joined, "英国和爱尔兰"; "" when one has none
    service_zh: str = ""  # the service's Chinese name; "" when it has none

    @property
    def what(self) -> str:
        return self.in_language("en")[2]

    def in_language(self, language: str) -> tuple[str, str, str]:
        """(place, number, what) in `language` (`en` or `zh`); English where the table has no Chinese name."""
        words = _WARNING_WORDS.get(language, _WARNING_WORDS["en"])
        if not self.codes:
            return words["elsewhere"], self.number, words["local"]
        chinese = language == "zh" and self.place_zh and self.service_zh
        if not chinese:
            words = _WARNING_WORDS["en"]
        place, service = (self.place_zh, self.service_zh) if chinese else (self.place, self.service)
        return place, self.number, words["texts"].format(service) if self.texts else service

    def __iter__(self) -> Iterator[str]:
        return iter(self.in_language("en"))


@functools.lru_cache(maxsize=4)
def warning_lines(lines: CrisisLines | None = None) -> tuple[WarningLine, ...]:
    """The lines every content warning shows: the first service of each of WARNING_COUNTRIES (countries
    in a row whose services share a number make one line, "United Kingdom and Ireland"), then the first
    international directory, "Elsewhere"."""
    lines = lines or load_crisis_lines()
    out: list[WarningLine] = []
    for code in WARNING_COUNTRIES:
        country = lines.countries[code]
        service = country.services[0]
        number = (service.numbers or service.text)[0]
        last = out[-1] if out else None
        if last is not None and digits(last.number) == digits(number):
            en, zh = _WARNING_WORDS["en"]["and"], _WARNING_WORDS["zh"]["and"]
            place_zh = f"{last.place_zh}{zh}{country.name_zh}" if last.place_zh and country.name_zh else ""
            out[-1] = replace(last, codes=(*last.codes, code), place=f"{last.place}{en}{country.name}",
                              place_zh=place_zh)  # fmt: skip
            continue
        out.append(WarningLine((code,), country.name, number, service.name, number in service.text,
                               country.name_zh, service.name_zh))  # fmt: skip
    directory = lines.international[0]
    out.append(WarningLine((), "Elsewhere", directory.url.removeprefix("https://").rstrip("/"), directory.name))
    return tuple(out)


__all__ = [
    "Country",
    "CrisisLines",
    "International",
    "Service",
    "WarningLine",
    "lines_for",
    "load_crisis_lines",
    "normalise_locale",
    "warning_lines",
]
