"""Which judge a name means: the kinds of judge, built-in and plug-in (entry point group `mheval.judges`).

The built-ins (judges/__init__.py) are the offline judge at its two speeds, a trained judge file and a
fine-tuned judge folder; a name no kind takes is a chat model spec, judged by the LLM judge. A plug-in
package declares a `JudgeKind` under the entry point group `mheval.judges`:

    judge_kind = JudgeKind("myjudge", matches=lambda spec: spec.startswith("myjudge:"), build=make_my_judge)

where `make_my_judge(spec, models, config)` returns a `Judge` (judges/base.py). A plug-in judge needs no chat
model from the run (`models` is the run's opened models, given for judges that want to reuse one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mheval.config import RunConfig
from mheval.judges.base import Judge
from mheval.models.base import ChatModel
from mheval.plugins import Registry

JUDGE_GROUP = "mheval.judges"


@dataclass(frozen=True)
class JudgeKind:
    """A kind of judge: the names it takes and how to build one from its name and the run's settings."""

    name: str
    matches: Callable[[str], bool]
    build: Callable[[str, Mapping[str, ChatModel], RunConfig], Judge]


JUDGES: Registry[JudgeKind] = Registry(JUDGE_GROUP, JudgeKind)


__all__ = ["JUDGES", "JUDGE_GROUP", "JudgeKind"]
