"""Personal data masked before a judge reads it: names, e-mail addresses, phone numbers, street addresses, URLs.

`Redactor().redact(text, locale)` returns the text with each piece of personal data replaced by a typed
placeholder (`[NAME]`, `[EMAIL]`, `[PHONE]`, `[ADDRESS]`, `[URL]`) and how many of each it replaced;
`redact_all(texts, locale)` does the same for the texts of one conversation, so a name said in one turn is
masked wherever it comes back. English and Chinese (simplified and traditional) are covered.

Detection is done by maintained libraries, run without any download:

- Microsoft Presidio's analyzer (`presidio-analyzer`) runs the recognizers, on its no-op NLP engine (no spaCy
  model is loaded or fetched). Its e-mail recognizer finds addresses (its domain check reads tldextract's
  bundled suffix list: `suffix_list_urls=()` turns off the fetch tldextract would otherwise try); its URL
  recognizer finds links, with its bare-domain pattern narrowed (below); pattern recognizers registered here
  find street addresses and names.
- `phonenumbers` (Google's libphonenumber) finds phone numbers: its `PhoneNumberMatcher` is tried for the
  locale's region and then COMMON_REGIONS, and a number valid for one of them is masked (another region's only
  when written as a phone number or said to be one); after words that say a number follows ("call me at",
  电话), so is any run of seven digits or more.

Crisis lines are not personal data, and a judge must see them: every number, text number and emergency
number of `resources/crisis_lines.yaml` (any country, any of its written forms) and the web addresses of its
services and directories are kept, so "call 988" or "Samaritans on 116 123" reaches the judge unchanged.

Names are the hard part: no named-entity model is available offline, so names are found only where the
words around them say a name follows ("my name is X", "I'm X,", "Dr X", "my sister X", a greeting or a
signature; 我叫X, 我是X, 王先生, 李老师 ...). docs/redaction.md lists what this misses. A name found once is
masked everywhere it recurs in the same texts.

The analyzer is imported only when a Redactor is made; `require()` says how to install it when it is absent
(`pip install 'mheval[redact]'`). Results are deterministic: the same text and locale give the same output.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mheval.errors import InputError
from mheval.resources import CrisisLines, digits, load_crisis_lines, normalise_locale
from mheval.textscan import CJK_IDEOGRAPHS

if TYPE_CHECKING:
    from presidio_analyzer import AnalyzerEngine

KINDS = ("NAME", "EMAIL", "PHONE", "ADDRESS", "URL")
"""What is masked, each by its placeholder `[KIND]`."""

INSTALL_HINT = "pip install 'mheval[redact]'"

# Regions whose numbers are looked for in every text, after the locale's own: the countries mheval's
# suites and crisis-line table cover most (English- and Chinese-speaking).
COMMON_REGIONS = ("US", "GB", "CN", "TW", "HK", "AU", "CA", "IE", "NZ", "SG", "IN")

# Presidio keeps its recognizers per language; one code for all of them, since every pattern here is
# written for the script it reads (Latin or Han), and a code-mixed text needs both.
_LANG = "mul"
_MIN_SCORE = 0.3
# When two findings overlap, the longer wins; on equal length, the kind earlier here.
_PRIORITY = {"EMAIL": 0, "URL": 1, "PHONE": 2, "ADDRESS": 3, "NAME": 4}
_PRESIDIO_KINDS = {"EMAIL_ADDRESS": "EMAIL", "URL": "URL", "STREET_ADDRESS": "ADDRESS", "PERSON": "NAME"}

_DIGIT = re.compile(r"\d")
# A run of digits with the separators phone numbers are written with, from an optional + or (.
_NUMBER_RUN = re.compile(r"[+＋(（]?\d[\d \t().\-‐–/（）]*\d")
# Words that say a number is a phone number, for numbers no region's plan knows (a local number without its area
# code, "555-0199"); the number must follow within 30 characters.
_PHONE_CUE = re.compile(
    r"(?i:\b(?:phone|cell|mobile|number|call me|text me|reach me|ring me|whatsapp|signal|tel)\b)|"
    r"电话|電話|手机|手機|号码|號碼|微信|联系我|聯絡我"
)
_CJK = CJK_IDEOGRAPHS  # Han characters, simplified and traditional (textscan.py owns the ranges)


@dataclass(frozen=True)
class Redacted:
    """A text with its personal data masked, and how many spans of each kind were masked."""

    text: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def masked(self) -> int:
        return sum(self.counts.values())


def available() -> bool:
    """Whether the detection libraries are installed (the `redact` extra)."""
    return all(importlib.util.find_spec(m) is not None for m in ("phonenumbers", "presidio_analyzer", "tldextract"))


def library_versions() -> list[str]:
    """The detecting libraries as installed ("phonenumbers 9.0.43", ...): a new version may mask differently."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for package in ("presidio-analyzer", "phonenumbers", "tldextract"):
        try:
            out.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            out.append(f"{package} absent")
    return out


def require(option: str = "--redact") -> None:
    """An InputError naming the install command when the `redact` extra is missing."""
    if not available():
        raise InputError(f"masking personal data needs Presidio and phonenumbers: {INSTALL_HINT}", field=option)


# -- names: the words around a name ---------------------------------------------------------------

# A capitalised word, with inner hyphens or apostrophes (Mary-Jane, O'Neil); a name is one to three of them.
_UPPER, _LOWER = "A-ZÀ-ÖØ-Þ", "a-zß-öø-ÿ"  # with the accented letters of Latin-1 (José, Zoë)
_WORD = rf"[{_UPPER}][{_LOWER}]+(?:[-'][{_UPPER}]?[{_LOWER}]+)*"
_FULL = rf"{_WORD}(?:[ \t]+{_WORD}){{0,2}}"
_RELATIONS = (
    r"friend|best friend|boyfriend|girlfriend|partner|husband|wife|fianc[ée]e?|ex|son|daughter|kid|child|baby|"
    r"mom|mum|mother|dad|father|brother|sister|cousin|aunt|uncle|grandma|grandmother|grandpa|grandfather|"
    r"nan|nana|therapist|counsell?or|psychiatrist|psychologist|doctor|gp|nurse|boss|manager|teacher|tutor|"
    r"coach|roommate|flatmate|housemate|neighbou?r|coworker|co-worker|colleague|classmate|pastor|priest"
)
_TITLES = r"Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Professor|Doctor|Nurse|Pastor|Father|Sister|Aunt|Auntie|Uncle|Coach"
_SIGN_OFFS = r"thanks|thank you|best|best wishes|regards|kind regards|cheers|love|sincerely|take care|xo|xx"
# Whole-match patterns with the name itself as the match: the cue sits in a lookbehind (the `regex`
# module Presidio uses allows it to vary in length) or a lookahead.
_EN_NAME_PATTERNS = (
    ("intro", rf"(?<=\b(?i:my name is|my name's|name's|i go by|they call me|people call me)[ \t]+){_FULL}", 0.85),
    # Lower-case after an explicit "my name is" too (chat is often written so); the stop list weeds out
    # "my name is not important".
    ("intro-lower", r"(?<=\b(?i:my name is|my name's)[ \t]+)[a-z][a-z]{2,}(?=[ \t]*(?:[,.!?;]|$|\band\b))", 0.6),
    ("call-me", rf"(?<=\b(?i:call me)[ \t]+){_WORD}(?=[ \t]*(?:[,.!?]|$))", 0.6),
    ("this-is", rf"(?<=\b(?i:this is|it's)[ \t]+){_WORD}(?=[ \t]+(?i:here|speaking)\b)", 0.6),
    ("im", rf"(?<=\b(?:I'm|I’m|I am|Im|i'm|i am)[ \t]+){_FULL}(?=[ \t]*(?:[,.!?;]|$|\b(?:and|here|from)\b))", 0.6),
    ("title", rf"(?<=\b(?:{_TITLES})\.?[ \t]+){_FULL}", 0.7),
    ("relation", rf"(?<=\b(?i:my|our|his|her|their)[ \t]+(?i:{_RELATIONS}),?[ \t]+){_FULL}", 0.6),
    ("greeting", rf"(?<=(?:^|\n)[ \t]*(?i:hi|hello|hey|dear)[ \t]+){_FULL}(?=[ \t]*[,!.:])", 0.6),
    (
        "signature",
        rf"(?<=(?:^|\n)[ \t]*(?:[-–—~]+[ \t]*|(?i:{_SIGN_OFFS})[,!.]?[ \t]*\n[ \t]*)){_FULL}(?=[ \t]*$)",
        0.6,
    ),
)
# Capitalised words that follow those cues without being names ("I'm Sorry,", "my friend The ...").
_NOT_NAMES_TEXT = """
    sorry fine okay ok good great well tired sad scared afraid alone lost done not so just really very here there
    still also only never always sure glad happy worried anxious depressed exhausted overwhelmed confused angry
    upset hurt broken okay alright thanks thank the a an this that it he she they we you i me my your his her our
    their what who how why when where yes no hello hi hey dear sir madam everyone all team friend friends mom mum
    dad god jesus lord christmas monday tuesday wednesday thursday friday saturday sunday january february march
    april may june july august september october november december english chinese american british australian
    important irrelevant unimportant nobody someone anyone nothing something lol ugh um uh oh numb empty suicidal
    single married divorced pregnant sick ill drunk sober high back home gay straight trans bi queer catholic muslim
    jewish hindu buddhist atheist autistic bipolar adhd new old young dying finished serious honest
    """
# Words with these endings after "I'm" are states, not names ("I'm Hopeless.", "I'm Struggling,").
_NOT_NAME_ENDINGS = ("ing", "less", "ful", "ous", "ive", "ish", "able", "ible")
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())

# Chinese: common surnames (simplified and traditional forms), the compound ones first.
_CN_COMPOUND_TEXT = "欧阳 歐陽 司马 司馬 诸葛 諸葛 上官 东方 東方 慕容 令狐 皇甫 公孙 公孫 司徒 夏侯 尉迟 尉遲"
_CN_COMPOUND = _CN_COMPOUND_TEXT.split()
_CN_SURNAMES = (
    "王李张張刘劉陈陳杨楊黄黃赵趙吴吳周徐孙孫马馬朱胡郭何林罗羅高郑鄭梁谢謝宋唐许許韩韓冯馮邓鄧曹彭曾"
    "肖萧蕭田董袁潘蔡蒋蔣余杜叶葉程苏蘇魏吕呂丁任沈姚卢盧姜崔钟鍾谭譚陆陸汪范金石廖贾賈夏韦韋付傅方邹鄒"
    "熊孟秦邱江尹薛闫閆段雷侯龙龍史陶黎贺賀顾顧毛郝龚龔邵万萬钱錢严嚴覃武戴莫孔汤湯颜顏柯欧歐翁庄莊"
)
_CN_SURNAME = "(?:" + "|".join(_CN_COMPOUND) + f"|[{_CN_SURNAMES}])"
_CN_SURNAME_RE = re.compile("^" + _CN_SURNAME)
_CN_HONORIFICS = (
    "先生|女士|小姐|太太|老师|老師|医生|醫生|大夫|教授|博士|同学|同學|阿姨|叔叔|经理|經理|主任|师傅|師傅|"
    "律师|律師|护士|護士|社工|咨询师|諮詢師|心理师|心理師"
)
# A character of a given name: not one that goes on with the sentence (谢谢老师, 周日同学, 方向同学, 和老同学).
_ZH_NOT_GIVEN = "谢謝您你我他她它和跟与與及的了是在都也就向日末天年月号號一二三四五六七八九十个個们們位老小"
_ZH_GIVEN = f"(?:(?![{_ZH_NOT_GIVEN}])[{_CJK}])"
_ZH_INTRO = "我叫|我的名字是|我的名字叫|名字叫|我名叫|名叫|可以叫我|就叫我|我姓名是"
_ZH_NAME_PATTERNS = (
    # An explicit introduction: the name is whatever follows (trimmed at the first word that is not a name).
    # (叫我 alone is as often "tells me to": 叫我去急诊; only 可以叫我 / 就叫我 name a name.)
    ("zh-intro", rf"(?<=(?:{_ZH_INTRO}))[{_CJK}]{{2,4}}", 0.85),
    # 我是 + a surname and one or two characters, ending the clause ("我是王小明。"), not "我是学生".
    ("zh-iam", rf"(?<=我是){_CN_SURNAME}{_ZH_GIVEN}{{1,2}}(?=[，,。.!！?？；;\s]|$)", 0.6),
    # A surname (and given name) before an honorific: 王先生, 李老师, 陳醫生, 张伟医生.
    # Not after 感/多/谢 (感谢老师, 谢谢老师: thanks, not Teacher Xie).
    ("zh-title", rf"(?<![感多谢謝]){_CN_SURNAME}{_ZH_GIVEN}{{0,2}}?(?=(?:{_CN_HONORIFICS}))", 0.7),
    # A signature at the end: "——王小明".
    ("zh-signature", rf"(?<=(?:——|—|--|~)[ \t]*)[{_CJK}]{{2,4}}(?=[ \t]*$)", 0.6),
)
# Characters a name found after 我叫 stops before (the sentence goes on: "我叫小明今年十五岁").
_ZH_STOP = set("今是在的了我你他她它们們有和跟与與从從来來也就不很都还還又才刚剛已今年岁歲住家，。")
_ZH_NOT_NAMES_TEXT = "什么 什麼 自己 大家 没有 沒有 不是 一个 一個 高中 高中生 方便 安全 文科 马上 馬上 高兴 高興 江湖"
_ZH_NOT_NAMES = frozenset(_ZH_NOT_NAMES_TEXT.split())

# -- street addresses -----------------------------------------------------------------------------

_STREET_TYPES = (
    r"Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|Court|Ct|Place|Pl|Terrace|Crescent|"
    r"Close|Parade|Highway|Hwy|Square|Sq|Grove|Gardens|Walk|Row|Hill|Parkway|Pkwy"
)
_UNIT = r"(?:(?:Apt|Apartment|Unit|Flat|Suite|Ste|Room|Floor)\.?[ \t]*#?[ \t]*\w{1,5}[ \t]*,?[ \t]*)"
_EN_ADDRESS_PATTERNS = (
    (
        "en-street",
        rf"(?-i:{_UNIT}?\b\d{{1,5}}[A-Za-z]?(?:[ \t]*-[ \t]*\d{{1,5}})?,?[ \t]+(?:{_WORD}[ \t]+){{1,4}}"
        rf"(?:{_STREET_TYPES})\b\.?(?:,?[ \t]*{_UNIT})?(?:,[ \t]*{_WORD}(?:[ \t]+{_WORD}){{0,2}})?"
        r"(?:,?[ \t]+[A-Z]{2}[ \t]+\d{5}(?:-\d{4})?)?)",
        0.7,
    ),
    # A street without a number, after "I live on/at", "my address is".
    (
        "en-live-on",
        rf"(?<=\b(?i:live (?:on|at)|living (?:on|at)|address is|moved to|staying (?:on|at))[ \t]+)"
        rf"(?-i:(?:{_WORD}[ \t]+){{1,3}}(?:{_STREET_TYPES}))\b",
        0.6,
    ),
    # A UK postcode (SW1A 1AA), upper case as written on post.
    ("uk-postcode", r"(?-i:\b[A-Z]{1,2}\d[A-Z\d]?[ \t]?\d[A-Z]{2}\b)", 0.5),
)
_ZH_ADMIN = r"(?:省|市|自治区|自治區|区|區|县|縣|镇|鎮|乡|鄉|村)"
_ZH_ROAD = r"(?:路|街|大道|巷|弄|胡同)"  # not 道 or 里 alone: 我知道3号, 那里5号 are dates
_ZH_NUM = r"[0-9０-９一二三四五六七八九十百]+"
_ZH_ADDRESS_PATTERNS = (
    (
        "zh-street",
        rf"(?:[{_CJK}]{{2,6}}?{_ZH_ADMIN}){{0,3}}[{_CJK}]{{1,6}}?{_ZH_ROAD}(?:{_ZH_NUM}段)?(?:{_ZH_NUM}(?:巷|弄))?"
        rf"{_ZH_NUM}(?:之{_ZH_NUM})?[号號](?:{_ZH_NUM}(?:号楼|號樓|栋|棟|幢|楼|樓|层|層|单元|單元|室|号|號|F|f))*",
        0.7,
    ),
    (
        "zh-estate",
        rf"[{_CJK}]{{2,6}}?(?:小区|小區|花园|花園|公寓|大厦|大廈|新村|社区|社區)"
        rf"{_ZH_NUM}(?:号楼|號樓|栋|棟|幢|座)(?:{_ZH_NUM}(?:单元|單元|楼|樓|层|層|室|号|號))*",
        0.7,
    ),
)
# Characters an address match may start with that belong to the sentence, not the address ("住在北京市...").
_ZH_ADDRESS_LEAD = set("我你他她住在于於到是的从從去来來搬")

# -- URLs: Presidio's schema'd forms, and bare domains only under common endings --------------------

# Presidio's own bare-domain pattern reads any country ending, so "3 a.m" or "home.it" would be a URL.
_BARE_TLDS = r"com|org|net|edu|gov|io|info|me|app|co|uk|cn|tw|hk|au|ca|ie|nz|sg|in|us|ly|gg|tv"
_URL_PATTERNS = (
    ("schema", r"\bhttps?://[^\s<>\"'，。、）)]+", 0.7),
    ("www", r"\bwww\d{0,3}\.[a-z0-9\-]+(?:\.[a-z0-9\-]+)+(?:/[^\s<>\"'，。、）)]*)?", 0.6),
    ("bare", rf"(?<![@\w.])(?:[a-z0-9\-]{{2,63}}\.)+(?:{_BARE_TLDS})\b(?!\.\w)(?:/[^\s<>\"'，。、）)]*)?", 0.5),
)
_URL_TRAILING = ".,;:!?)]}'\"…"


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    kind: str


class Redactor:
    """Masks personal data in texts; make one and reuse it (building the analyzer takes about a second)."""

    def __init__(self, lines: CrisisLines | None = None, regions: Sequence[str] = COMMON_REGIONS) -> None:
        require()
        self._lines = lines or load_crisis_lines()
        self._regions = tuple(regions)
        self._analyzer = _analyzer()
        self._keep_numbers = _crisis_numbers(self._lines)
        self._keep_hosts = _crisis_hosts(self._lines)

    def redact(self, text: str, locale: str | None = None) -> Redacted:
        """`text` with its personal data masked; `locale` (a country or language tag) picks the phone region
        tried first."""
        return self.redact_all([text], locale)[0]

    def redact_all(self, texts: Sequence[str], locale: str | None = None) -> list[Redacted]:
        """The texts of one conversation, each masked; a name found in any of them is masked in all."""
        found = [self._find(t, locale) for t in texts]
        names = _recurring_names(
            name for spans, text in zip(found, texts, strict=True) for name in _names_in(spans, text)
        )
        out = []
        for text, spans in zip(texts, found, strict=True):
            out.append(_mask(text, _resolve([*spans, *_occurrences(text, names)])))
        return out

    # -- detection ------------------------------------------------------------------------------

    def _find(self, text: str, locale: str | None) -> tuple[_Span, ...]:
        # A run judges each text several times (each protocol, judge and repeat): found once.
        return self._found(text, normalise_locale(locale))

    @functools.lru_cache(maxsize=1 << 14)  # noqa: B019 - the redactor lives as long as the process's run
    def _found(self, text: str, region: str | None) -> tuple[_Span, ...]:
        if not text.strip():
            return ()
        spans = [*self._analyzed(text), *self._phones(text, region)]
        return tuple(s for s in spans if not self._is_crisis_resource(text, s))

    def _analyzed(self, text: str) -> list[_Span]:
        spans = []
        for r in self._analyzer.analyze(text=text, language=_LANG, score_threshold=_MIN_SCORE):
            kind = _PRESIDIO_KINDS.get(r.entity_type)
            if kind is None:
                continue
            start, end = r.start, r.end
            if kind == "URL":
                while end > start and text[end - 1] in _URL_TRAILING:
                    end -= 1
            elif kind == "ADDRESS":
                while start < end and text[start] in _ZH_ADDRESS_LEAD:
                    start += 1
            elif kind == "NAME":
                start, end = _trimmed_name(text, start, end)
            if end > start:
                spans.append(_Span(start, end, kind))
        return spans

    def _phones(self, text: str, locale: str | None) -> list[_Span]:
        """Each run of digits that could be a phone number, read by the matcher of the locale's region and then
        of each common region until one finds a valid number there (a number written for one region is
        usually not valid for the others, and trying every region on every text would be slow). Another
        region's number counts when it is written as a phone number or words before it say it is one."""
        import phonenumbers

        own = normalise_locale(locale)
        regions = list(dict.fromkeys([own, *self._regions] if own else self._regions))
        spans: list[_Span] = []
        for candidate in _NUMBER_RUN.finditer(text):
            if len(_DIGIT.findall(candidate.group())) < 6:  # shorter numbers are not a person's phone
                continue
            cue = _PHONE_CUE.search(text[max(0, candidate.start() - 30) : candidate.start()]) is not None
            start, end = max(0, candidate.start() - 1), min(len(text), candidate.end() + 1)
            window = text[start:end]
            for region in regions:
                found = [
                    m
                    for m in phonenumbers.PhoneNumberMatcher(window, region, leniency=phonenumbers.Leniency.VALID)
                    if region == own or cue or _looks_like_a_phone(m.raw_string)
                ]
                spans += [
                    _Span(start + m.start, start + m.end, "PHONE")
                    for m in found
                    if not self._is_crisis_number(m.raw_string, m.number)
                ]
                if found:
                    break
            else:  # no region's matcher takes it: still a phone when the words before say so
                digits_only = digits(candidate.group())
                if cue and len(digits_only) >= 7 and digits_only not in self._keep_numbers:
                    spans.append(_Span(candidate.start(), candidate.end(), "PHONE"))
        return spans

    # -- what is kept -----------------------------------------------------------------------------

    def _is_crisis_number(self, raw: str, number: Any) -> bool:
        """A line of the table, or a number the numbering plan gives only to organisations (toll-free,
        shared-cost, premium-rate, universal access: China's 400 lines, 1-800 numbers): never a person's."""
        import phonenumbers

        if phonenumbers.number_type(number) in _organisation_types():
            return True
        national = phonenumbers.national_significant_number(number)
        forms = {digits(raw), digits(raw).lstrip("0"), national, f"{number.country_code}{national}"}
        return bool(forms & self._keep_numbers)

    def _is_crisis_resource(self, text: str, span: _Span) -> bool:
        if span.kind != "URL":
            return False
        link = text[span.start : span.end]
        host = (urlsplit(link if "//" in link else f"//{link}").hostname or "").removeprefix("www.")
        return any(host == h or host.endswith("." + h) for h in self._keep_hosts)


# -- the analyzer ---------------------------------------------------------------------------------


@functools.cache
def _organisation_types() -> frozenset[int]:
    from phonenumbers import PhoneNumberType as T

    return frozenset({T.TOLL_FREE, T.SHARED_COST, T.PREMIUM_RATE, T.UAN})


def _import_presidio() -> None:
    """Import the analyzer without its optional model back-ends: where torch and transformers are installed
    (mheval's finetune extra), Presidio imports them for its transformers engine, which is never used here and
    costs some 25 s. Marked absent for the import only, they import normally afterwards."""
    blocked = [m for m in ("transformers", "torch") if m not in sys.modules]
    for module in blocked:
        sys.modules[module] = None  # type: ignore[assignment]  # the documented way to make an import fail
    try:
        import presidio_analyzer
        import presidio_analyzer.nlp_engine  # noqa: F401
    finally:
        for module in blocked:
            if sys.modules.get(module) is None:
                del sys.modules[module]


@functools.cache
def _analyzer() -> AnalyzerEngine:
    """Presidio's analyzer on its no-op NLP engine with the recognizers above (built once per process)."""
    _import_presidio()
    import regex
    import tldextract
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NoOpNlpEngine
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    offline_domains = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        """Presidio's e-mail recognizer, its domain checked against the bundled suffix list only."""

        def validate_result(self, pattern_text: str) -> bool:
            return offline_domains(pattern_text).fqdn != ""

    class NameRecognizer(PatternRecognizer):
        """Names after the cues above, less the capitalised words that are not names."""

        def validate_result(self, pattern_text: str) -> bool | None:
            words = pattern_text.lower().split()
            if not words or pattern_text in _ZH_NOT_NAMES:
                return False
            if any(w in _NOT_NAMES for w in words) or any(w.endswith(_NOT_NAME_ENDINGS) for w in words[1:]):
                return False
            return False if len(words[0]) > 5 and words[0].endswith(_NOT_NAME_ENDINGS) else None

    def patterns(specs: Iterable[tuple[str, str, float]]) -> list[Pattern]:
        return [Pattern(name, source, score) for name, source, score in specs]

    flags = regex.DOTALL | regex.MULTILINE  # case matters for names and addresses; cues say (?i:) themselves
    registry = RecognizerRegistry(supported_languages=[_LANG])
    registry.add_recognizer(OfflineEmailRecognizer(supported_language=_LANG))
    registry.add_recognizer(
        PatternRecognizer(
            "URL", name="UrlRecognizer", patterns=patterns(_URL_PATTERNS), supported_language=_LANG,
            global_regex_flags=flags | regex.IGNORECASE,
        )
    )  # fmt: skip
    registry.add_recognizer(
        PatternRecognizer(
            "STREET_ADDRESS", name="StreetAddressRecognizer", supported_language=_LANG, global_regex_flags=flags,
            patterns=patterns([*_EN_ADDRESS_PATTERNS, *_ZH_ADDRESS_PATTERNS]),
        )
    )  # fmt: skip
    registry.add_recognizer(
        NameRecognizer(
            "PERSON", name="NameCueRecognizer", supported_language=_LANG, global_regex_flags=flags,
            patterns=patterns([*_EN_NAME_PATTERNS, *_ZH_NAME_PATTERNS]),
        )
    )  # fmt: skip
    engine = NoOpNlpEngine(models=[{"lang_code": _LANG, "model_name": "none"}])
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=[_LANG])


def _looks_like_a_phone(raw: str) -> bool:
    """Written as phone numbers are (+, brackets or separators), or long enough (10 digits and more) that
    little else is: a bare "25000000" is a valid Hong Kong number but, in a text from elsewhere, an amount."""
    return raw.lstrip().startswith(("+", "＋", "(", "（")) or not raw.strip().isdigit() or len(raw.strip()) >= 10


def _crisis_numbers(lines: CrisisLines) -> frozenset[str]:
    """Every crisis-line and emergency number of the table, in the digit forms a text may write it."""
    import phonenumbers

    out: set[str] = set()
    for country in lines.countries.values():
        numbers = [n for s in country.services for n in (*s.numbers, *s.text)] + list(country.emergency)
        for number in numbers:
            d = digits(number)
            out.update({d, d.lstrip("0")})
            try:
                parsed = phonenumbers.parse(number, country.code)
            except phonenumbers.NumberParseException:
                continue
            national = phonenumbers.national_significant_number(parsed)
            out.update({national, f"{parsed.country_code}{national}"})
    return frozenset(x for x in out if x)


def _crisis_hosts(lines: CrisisLines) -> frozenset[str]:
    urls = [s.url for c in lines.countries.values() for s in c.services] + [i.url for i in lines.international]
    hosts = {(urlsplit(u).hostname or "").removeprefix("www.") for u in urls}
    # Directories named by their address ("befrienders.org") in the table's other names.
    hosts |= {n.lower() for i in lines.international for n in i.names if "." in n}
    return frozenset(h for h in hosts if h)


# -- names: trimming and recurrence ---------------------------------------------------------------


def _trimmed_name(text: str, start: int, end: int) -> tuple[int, int]:
    """A Chinese name found after 我叫 ends before the first character that goes on with the sentence."""
    if not re.match(f"[{_CJK}]", text[start]):
        return start, end
    for i in range(start + 2, end):  # a name has at least two characters
        if text[i] in _ZH_STOP:
            return start, i
    return start, end


def _names_in(spans: Sequence[_Span], text: str) -> list[str]:
    return [text[s.start : s.end] for s in spans if s.kind == "NAME"]


def _recurring_names(found: Iterable[str]) -> list[str]:
    """The strings to mask wherever they recur: each found name, and each word of an English full name
    ("Anna Lee" -> "Anna", "Lee") and the given name of a Chinese one (陈美玲 -> 美玲), longest first; single
    Chinese characters (a bare surname) are not."""
    out: set[str] = set()
    for name in found:
        if name.lower() in _NOT_NAMES or name in _ZH_NOT_NAMES:
            continue
        if re.match(f"[{_CJK}]", name):
            if len(name) >= 2:
                out.add(name)
            given = _CN_SURNAME_RE.sub("", name, count=1)
            if len(name) >= 3 and len(given) >= 2:  # 陈美玲 -> 美玲, the name friends call her by
                out.add(given)
            continue
        out.add(name)
        out.update(w for w in name.split() if len(w) >= 3 and w.lower() not in _NOT_NAMES)
    return sorted(out, key=lambda n: (-len(n), n))


def _occurrences(text: str, names: list[str]) -> list[_Span]:
    if not names:
        return []
    latin = [n for n in names if not re.match(f"[{_CJK}]", n)]
    han = [n for n in names if re.match(f"[{_CJK}]", n)]
    spans = []
    if latin:
        pattern = re.compile(r"(?<![\w'])(?:" + "|".join(map(re.escape, latin)) + r")(?![\w])")
        spans += [_Span(m.start(), m.end(), "NAME") for m in pattern.finditer(text)]
    if han:
        pattern = re.compile("|".join(map(re.escape, han)))
        spans += [_Span(m.start(), m.end(), "NAME") for m in pattern.finditer(text)]
    return spans


# -- masking --------------------------------------------------------------------------------------


def _resolve(spans: list[_Span]) -> list[_Span]:
    """Non-overlapping spans, in order: of overlapping findings the longer wins, then the kind first in
    _PRIORITY."""
    chosen: list[_Span] = []
    for span in sorted(spans, key=lambda s: (-(s.end - s.start), _PRIORITY[s.kind], s.start)):
        if all(span.end <= c.start or span.start >= c.end for c in chosen):
            chosen.append(span)
    return sorted(chosen, key=lambda s: s.start)


def _mask(text: str, spans: list[_Span]) -> Redacted:
    if not spans:
        return Redacted(text, {})
    parts, last = [], 0
    for span in spans:
        parts += [text[last : span.start], f"[{span.kind}]"]
        last = span.end
    parts.append(text[last:])
    counts = Counter(s.kind for s in spans)
    return Redacted("".join(parts), {k: counts[k] for k in KINDS if counts[k]})


__all__ = [
    "COMMON_REGIONS",
    "INSTALL_HINT",
    "KINDS",
    "Redacted",
    "Redactor",
    "available",
    "library_versions",
    "require",
]
