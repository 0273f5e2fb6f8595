"""Regexes with a literal prefilter: skip the regex when the text lacks every string a match must contain.

The reply checks (judges/flags.py, resources/matching.py) run dozens of word-list regexes on every
judged reply, and almost all of them do not match. Python's `re` tries such a pattern at every
position; a substring test (`needle in text`) runs in C and is many times faster. `Prefiltered` works
out, from the pattern's own parse tree, sets of literal strings such that every match contains one
string of each set ({"ignore", "disregard", ...} and {"rubric", "instructions", ...} for
`\\b(?:ignore|disregard|...)\\b[^.]{0,40}?\\b(?:rubric|instructions|...)`), and searches only texts that
pass that test. The test is done on `fold(text)` with folded needles: lower case, with the Turkish
dotted capital and dotless small i made a plain "i" (re.IGNORECASE matches them to "i" one character
for one, while str.lower turns the capital into two characters). Callers NFKC-normalise first, which
folds the other characters where the two part ways (long s, Kelvin and Angstrom signs, ligatures). So
the test is a necessary condition whether or not the pattern ignores case. A pattern whose needles
cannot be worked out (or a Python whose parser differs) is always searched: the filter can only skip,
never change, a result.

It is also the one home of the text tables several rooms read: which characters are CJK ideographs
(`CJK_IDEOGRAPHS`, `has_cjk`, `count_cjk`), the wider set of East Asian characters (`CJK_SCRIPTS`), and
the one language guess for a text that does not say its language (`detect_language`), and the characters
that differ between simplified and traditional Chinese (`SCRIPT_MARK_PAIRS`, `SIMPLIFIED_MARKS`,
`TRADITIONAL_MARKS`, `TRADITIONAL_TO_SIMPLIFIED`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

try:  # the parser behind `re`; its shape is stable since 3.11 but private, hence the fallback
    from re import _constants as _c
    from re import _parser as _p
except ImportError:  # pragma: no cover - other Pythons search every text
    _c = _p = None

_TURKISH_I = str.maketrans({"\u0130": "i", "\u0131": "i"})


def fold(text: str) -> str:
    """The form needles are looked for in (see the module docstring)."""
    return text.translate(_TURKISH_I).lower()


Needles = tuple[frozenset[str], ...]  # every match holds at least one string of each set


def needles(pattern: re.Pattern[str]) -> Needles | None:
    """Sets of strings (lower-cased) such that every match of `pattern` holds one of each, or None."""
    if _p is None:
        return None
    try:
        found = _candidates(list(_p.parse(pattern.pattern, pattern.flags)))
    except Exception:  # a construct this walk does not know: no filter
        return None
    usable = [s for s in found if all(n and len(fold(n)) == len(n) for n in s)]
    return tuple(frozenset(fold(n) for n in s) for s in usable) or None


def _candidates(items: list[tuple[Any, Any]]) -> list[set[str]]:
    """Every set of strings a match of this sequence of parse items must hold one of: each run of
    literals, and what each required group, alternation or repeat requires."""
    found: list[set[str]] = []
    run = ""
    for op, arg in items:
        if op is _c.LITERAL:
            run += chr(arg)
            continue
        if run:
            found.append({run})
            run = ""
        part: set[str] | None = None
        if op is _c.SUBPATTERN:
            part = _best(list(arg[-1]))
        elif op is _c.BRANCH:
            branches = [_best(list(b)) for b in arg[1]]
            part = None if any(b is None for b in branches) else set().union(*branches)  # type: ignore[arg-type]
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT) and arg[0] >= 1:
            part = _best(list(arg[2]))
        # Anything else (assertions, classes, optional parts) requires no particular string.
        if part:
            found.append(part)
    if run:
        found.append({run})
    return found


def _best(items: list[tuple[Any, Any]]) -> set[str] | None:
    """The most selective of a sequence's sets (longest shortest string, then fewest strings)."""
    found = _candidates(items)
    return max(found, key=lambda s: (min(len(n) for n in s), -len(s))) if found else None


class Prefiltered:
    """A compiled regex and its needles; `search(text, folded)` takes the text and `fold(text)`
    (computed once by the caller for all patterns)."""

    __slots__ = ("needles", "regex")

    def __init__(self, regex: re.Pattern[str]) -> None:
        self.regex = regex
        self.needles = needles(regex)

    def possible(self, folded: str) -> bool:
        return self.needles is None or all(any(n in folded for n in group) for group in self.needles)

    def search(self, text: str, folded: str) -> re.Match[str] | None:
        return self.regex.search(text) if self.possible(folded) else None


# -- CJK characters and the language of a text --------------------------------------------------------

CJK_IDEOGRAPHS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
"""Han ideographs as the body of a regex character class: CJK Unified Ideographs, Extension A,
Compatibility Ideographs and Extension B (what Chinese text is written in)."""

CJK_SCRIPTS = "\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff"
"""Wider than the ideographs, as a character-class body: every East Asian block of the BMP from the CJK
radicals to the ideographs (CJK punctuation, kana, bopomofo, Hangul syllables...). Grounding compares
quotes with it, where a space between two such characters is the judge's, not the text's."""

CJK_RE = re.compile(f"[{CJK_IDEOGRAPHS}]")


def is_cjk(ch: str) -> bool:
    """Whether the one character `ch` is a CJK ideograph."""
    return CJK_RE.fullmatch(ch) is not None


def has_cjk(text: str) -> bool:
    return CJK_RE.search(text) is not None


def count_cjk(text: str) -> int:
    return len(CJK_RE.findall(text))


def detect_language(text: str) -> Literal["en", "zh"]:
    """`zh` if the text holds any CJK ideograph, else `en`: the two languages mheval supports. Any one
    ideograph decides, so a Chinese turn after English small talk ("hi", "hello", "我最近睡不好") is zh."""
    return "zh" if has_cjk(text) else "en"


# -- Chinese scripts: simplified and traditional characters ---------------------------------------------

# Common characters written differently in the two Chinese scripts, as "simplified traditional" pairs, in two
# groups. The first marks a text's script: each of its characters belongs to one script only (characters both
# scripts write, such as 后, 里, 干, 台, 面, 只, 几, 系, are left out: they decide nothing). The second holds
# further pairs that are folded but mark nothing: the simplified form is also a traditional character (后 for 後,
# 里 for 裡 and 裏, 系 for 係, 发 for 髮, 几 for 幾, ...), or the pair was not chosen as a mark (making it one
# would change which scenarios pass the script check). Cheap on purpose: not a full converter.
_MARK_PAIRS_TEXT = (
    "这這 说說 没沒 会會 为為 们們 个個 时時 过過 还還 让讓 对對 话話 问問 题題 开開 觉覺 应應 该該 经經 样樣 难難 "
    "学學 帮幫 医醫 药藥 钱錢 点點 发發 现現 实實 东東 长長 关關 头頭 电電 车車 气氣 见見 听聽 边邊 来來 么麼 吗嗎 "
    "请請 谢謝 认認 识識 爱愛 亲親 妈媽 师師 业業 场場 总總 结結 给給 办辦 动動 岁歲 与與 从從 伤傷 语語 读讀 写寫 "
    "记記 论論 诉訴 试試 谁誰 谈談 讲講 负負 责責 买買 卖賣 费費 资資 转轉 轻輕 进進 远遠 连連 选選 错錯 门門 间間 "
    "闹鬧 队隊 险險 顾顧 领領 风風 饭飯 马馬 乐樂 书書 乱亂 传傳 儿兒 兴興 况況 别別 刚剛 务務 单單 压壓 变變 员員 "
    "图圖 国國 坏壞 声聲 处處 备備 将將 尽盡 带帶 当當 忆憶 怀懷 态態 恶惡 惊驚 惯慣 担擔 换換 数數 断斷 无無 显顯 "
    "机機 杀殺 极極 梦夢 欢歡 满滿 热熱 独獨 疗療 确確 离離 稳穩 穷窮 紧緊 约約 级級 线線 组組 终終 绝絕 继繼 续續 "
    "网網 职職 联聯 脑腦 脸臉 虑慮 虽雖 视視 观觀 计計 证證 诊診 误誤 课課 软軟 运運 遗遺 银銀 闷悶 阴陰 须須 饮飲 "
    "验驗 骗騙 鸡雞 龄齡 愿願 习習 环環 简簡 类類 细細 练練 绪緒 释釋 针針 顺順 项項 内內 烦煩 惨慘 恋戀 戏戲 决決 "
    "讨討 厌厭 骂罵 张張 导導 讯訊 频頻 泪淚 随隨 两兩 议議 规規 贵貴"
)
_FOLD_ONLY_PAIRS_TEXT = (
    "咨諮 询詢 专專 减減 忧憂 郁鬱 丧喪 体體 恼惱 愤憤 状狀 冲衝 报報 复復 坠墜 楼樓 桥橋 阳陽 后後 静靜 系係 划劃 "
    "准準 嘱囑 瘾癮 码碼 号號 拨撥 构構 缓緩 松鬆 启啟 呜嗚 凶兇 残殘 唤喚 护護 么麽 恶噁 争爭 战戰 贷貸 赌賭 驾駕 "
    "驶駛 飙飆 周週 哑啞 击擊 镇鎮 种種 际際 发髮 里裡 里裏 览覽 几幾 脚腳 寻尋 愈癒 丝絲 逻邏 疯瘋 惧懼 颤顫 烧燒 "
    "剂劑 监監 络絡 缘緣 谅諒 赶趕"
)
SCRIPT_MARK_PAIRS: tuple[str, ...] = tuple(_MARK_PAIRS_TEXT.split())
"""The pairs that tell the scripts apart, each "simplified traditional" (conversations/scenario's script check)."""

SIMPLIFIED_MARKS = frozenset(pair[0] for pair in SCRIPT_MARK_PAIRS)
TRADITIONAL_MARKS = frozenset(pair[1] for pair in SCRIPT_MARK_PAIRS) | frozenset("後裡裏爲説")
"""Characters that mark a Chinese text as written in simplified or in traditional characters (後, 裡, 裏, 爲 and
説 are traditional only, though their simplified forms are written in both scripts or are variants)."""

TRADITIONAL_TO_SIMPLIFIED: dict[int, str] = {
    ord(pair[1]): pair[0] for pair in (*SCRIPT_MARK_PAIRS, *_FOLD_ONLY_PAIRS_TEXT.split())
}
"""Every pair as a `str.translate` table, traditional to simplified: the offline lexicon folds a text with it so
that a cue written in simplified Chinese also fires on traditional text."""


__all__ = [
    "CJK_IDEOGRAPHS",
    "CJK_RE",
    "CJK_SCRIPTS",
    "SCRIPT_MARK_PAIRS",
    "SIMPLIFIED_MARKS",
    "TRADITIONAL_MARKS",
    "TRADITIONAL_TO_SIMPLIFIED",
    "Prefiltered",
    "count_cjk",
    "detect_language",
    "fold",
    "has_cjk",
    "is_cjk",
    "needles",
]
