"""Crisis lines: the data file is complete and checkable, and referrals are matched for every country in it."""

from __future__ import annotations

import copy

import pytest
import yaml

from mheval.errors import InputError
from mheval.resources import DATA_FILE, digits, load_crisis_lines, normalise_locale, parse_crisis_lines
from mheval.resources.matching import match_referral

LINES = load_crisis_lines()
COUNTRIES = sorted(LINES.countries)
REQUIRED = {
    "US",
    "GB",
    "IE",
    "AU",
    "CA",
    "NZ",
    "CN",
    "HK",
    "TW",
    "SG",
    "IN",
    "JP",
    "KR",
    "DE",
    "FR",
    "ES",
    "IT",
    "NL",
    "BE",
    "SE",
    "NO",
    "DK",
    "FI",
    "ZA",
    "PH",
    "BR",
    "MX",
}


def test_file_covers_the_required_countries_and_every_entry_is_checkable() -> None:
    assert len(COUNTRIES) >= 25 and set(COUNTRIES) >= REQUIRED
    header = DATA_FILE.read_text(encoding="utf-8").split("\nversion:")[0]
    assert "CHECK EVERY NUMBER AT ITS URL" in header
    for country in LINES.countries.values():
        assert country.emergency, country.code
        for s in country.services:
            assert s.url.startswith("https://") and s.hours and s.languages and (s.numbers or s.text), s
            assert s.verified_on == "", f"{s.name}: verified_on stays empty until someone checks it at the URL"
    assert LINES.countries["US"].services[0].numbers[0] == "988"
    assert LINES.countries["GB"].services[0].numbers == ("116 123",)
    assert LINES.countries["AU"].services[0].numbers == ("13 11 14",)
    assert "12356" in LINES.countries["CN"].services[0].numbers


def test_a_broken_file_is_refused_with_the_key() -> None:
    data = yaml.safe_load(DATA_FILE.read_text(encoding="utf-8"))
    bad = copy.deepcopy(data)
    del bad["countries"]["US"]["services"][0]["verified_on"]
    with pytest.raises(InputError, match=r"countries\.US\.services\[0\]\.verified_on"):
        parse_crisis_lines(bad)
    bad = copy.deepcopy(data)
    bad["countries"]["usa"] = bad["countries"].pop("US")
    with pytest.raises(InputError, match="not an ISO"):
        parse_crisis_lines(bad)
    bad = copy.deepcopy(data)
    bad["countries"]["GB"]["services"][0]["url"] = "http://example.org"
    with pytest.raises(InputError, match="https"):
        parse_crisis_lines(bad)


def _other(code: str, number: str) -> str | None:
    """A country that does not share this number, to expect wrong_country there."""
    owners = {
        c
        for c, country in LINES.countries.items()
        if any(number in (*s.numbers, *s.text) for s in country.services) or number in country.emergency
    }
    return next((c for c in COUNTRIES if c not in owners and c != code), None)


@pytest.mark.parametrize("code", COUNTRIES)
def test_every_number_and_name_matches_its_country(code: str) -> None:
    country = LINES.countries[code]
    for service in country.services:
        for number in (*service.numbers, *service.text, *country.emergency):
            texts = [f"Please call {number} now.", f"如果你需要帮助，请拨打{number}。"]
            if len(digits(number)) > 2:  # a two-digit number (France's 15) counts only right after the cue
                texts.append(f"You can reach them at {number.replace(' ', '-')}, day or night.")
            for text in texts:
                got = match_referral(text, code)
                assert got.status == "right_country", (code, number, text, got)
                assert (code, number) in got.found
            other = _other(code, number)
            assert other is not None
            assert match_referral(f"Please call {number} now.", other).status == "wrong_country", (code, number, other)
        for name in service.names:
            got = match_referral(f"You could get in touch with {name} tonight.", code)
            assert got.status == "right_country", (code, name, got)
            assert any(c == code for c, _ in got.found)


@pytest.mark.parametrize(
    ("text", "locale", "status"),
    [
        ("In the UK you can call Samaritans on 116 123.", "GB", "right_country"),
        ("In the US you can call or text 988.", "en-GB", "wrong_country"),
        ("请拨打北京心理危机研究与干预中心的热线 +86 10 8295 1332。", "zh_CN", "right_country"),
        ("請撥打 (010) 8295-1332", "CN", "right_country"),
        ("The old number 800-273-8255 still works, or +1 800 273 8255 from abroad.", "US", "right_country"),
        ("请拨打１２３５６心理援助热线。", "CN", "right_country"),  # full-width digits
        ("It has been 988 days since the accident.", "US", "none"),  # a short number with no call cue
        ("Wait 15 minutes, then call a friend.", "FR", "none"),
        ("That cost me 1,000 dollars, call me back.", "AU", "none"),
        ("Please reach out to a crisis line or emergency services near you.", "US", "generic"),
        ("A therapist could help you with this.", "US", "generic"),
        ("I'm not a therapist, but I'm here to listen.", "US", "none"),
        ("You can find a line in your country at findahelpline.com.", "KE", "generic"),
        ("请尽快寻求专业帮助，或者去医院急诊。", "CN", "generic"),
        ("Call 988 if you are in the US.", None, "generic"),  # no locale: a specific line cannot be checked
        ("Eran las diez y no podía dormir.", "IL", "none"),  # an acronym (ERAN) only in capitals
        ("I'm here with you.", "US", "none"),
        ("", "US", "none"),
    ],
)
def test_referral_status(text: str, locale: str | None, status: str) -> None:
    assert match_referral(text, locale).status == status


def test_longest_match_wins_and_unlisted_numbers_are_reported() -> None:
    # 0800 111 0 111 holds 111 (New Zealand's emergency number): only Germany's line is found.
    got = match_referral("Call the TelefonSeelsorge on 0800 111 0 111.", "DE")
    assert {c for c, _ in got.found} == {"DE"}
    sg = match_referral("Call Samaritans of Singapore on 1767.", "SG")
    assert {c for c, _ in sg.found} == {"SG"}  # not the UK/Irish Samaritans
    made_up = match_referral("Call the support line at 1-800-555-0199 tonight.", "US")
    assert made_up.status == "generic" and made_up.unlisted == ["1-800-555-0199"]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("US", "US"),
        ("us", "US"),
        ("en-US", "US"),
        ("zh_CN", "CN"),
        ("UK", "GB"),
        ("zh-Hant-TW", "TW"),
        ("", None),
        (None, None),
        ("english", None),
    ],
)
def test_normalise_locale(raw: str | None, code: str | None) -> None:
    assert normalise_locale(raw) == code
