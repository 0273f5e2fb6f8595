"""Whether a finished run produced anything to read: the causes for which the command exits 3 even though
every stage ran to its end (besides provider errors, which running again retries).

- every conversation of a multi-turn run failed in the simulator (stop reason `simulator_failure`);
- judging was asked for and no unit could be judged: no judgment is scored (all unscored, or none made).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from mheval.runfolder.store import Store


def run_problems(
    store: Store, stages: Collection[str], judges: Collection[str], scenario_ids: Collection[str]
) -> list[str]:
    """One message per cause, naming it and its count; empty when the run has results to read."""
    problems: list[str] = []
    if scenario_ids and "generate" in stages:
        conversations = [c for c in store.conversations() if c.scenario_id in scenario_ids]
        failed = [c for c in conversations if c.stop_reason == "simulator_failure"]
        if conversations and len(failed) == len(conversations):
            first = f" (the first: {failed[0].detail})" if failed[0].detail else ""
            problems.append(
                f"every conversation failed in the simulator: {len(failed)} of {len(conversations)} stopped with "
                f"simulator_failure{first}, so none was judged"
            )
    if judges and {"triage", "judge"} & set(stages):
        reasons: Counter[str] = Counter()
        scored = 0
        for j in store.iter_judgments():
            if j.status == "ok":
                scored += 1
                break
            reasons[str(j.reason or "unspecified").split(":", 1)[0]] += 1
        if not scored and not problems:
            if reasons:
                why = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
                problems.append(
                    f"no unit could be judged: all {sum(reasons.values())} judgment(s) are unscored ({why})"
                )
            else:
                problems.append("no unit could be judged: the run holds nothing to judge (0 judgments)")
    return problems


__all__ = ["run_problems"]
