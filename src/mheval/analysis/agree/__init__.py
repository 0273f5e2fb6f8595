"""Human-vs-human and judge-vs-human agreement, side by side, with verdicts.

`agreement_report` takes the long human table of `load_human_labels` (``id``, ``rater``, ``value``,
optional ``dimension``, optional ``model``/``sample`` for response-level ratings) and, optionally,
mheval's judgments export (``case_id, model, sample, protocol, judge, repeat, label, scores, status,
reason``). Only ``status == "ok"`` judgments count; the others are counted and reported, never scored.

Per dimension the report has one block for the humans among themselves and one block per judge
against the humans, over the same items (the human-labelled ones), so every bootstrap in the report
sees the same resamples. The headline statistic is the mean Cohen's kappa over rater pairs for
labels and the mean two-rater ICC(A,1) for numeric scales; a judge's verdicts compare its
judge-vs-each-human values with the human-vs-human pairs (see `mheval.stats.reliability`).

Unit of analysis (``unit=``):

* ``"item"`` (default): every rated item (case, or response when the labels carry model/sample) is
  one unit, as above.
* ``"model"``: MentalAlign's unit. Items are grouped by their response source (the ``model`` column);
  per judge x dimension, each source's mean human score and mean judge score are taken over the
  items where both exist (the human score of an item being the mean over its raters, the judge's
  the mean over its ok repeats), and ICC(C,1) and ICC(A,1) are computed over that sources x 2
  matrix, with a percentile bootstrap over the sources, width verdicts for both, and the judge-minus-
  human bias over the sources. Numeric scales only. The source of a human-labelled item is the
  ``model`` column of the human labels when they have one (long form: ``id, rater, value, model``);
  otherwise the item ``id`` is matched to the judgments' ``case_id`` and that row's ``model`` is taken
  (a case judged under several models then needs the ``model`` column in the human labels).
  The humans' block holds each rater's mean per source (over the items that rater scored) and the
  rater-vs-rater ICCs over the sources; a judge's "vs human range" uses those over its own sources.

``leave_own_model_out=True`` drops, per judge, the responses of the judge's own model family
(`mheval.models.families.same_family`: gpt-4o also leaves out gpt4omini, a distilled model counts in both
its families), in either unit: MentalAlign's guard against judges favouring their own outputs.
MentalAlign itself left out only the exact own model; pass ``own_model`` for that rule.

The package, one job per module: `report` (the report's dataclasses and their renderings), `inputs`
(reading the human labels and the judgments), `items` (the item unit's statistics), `models` (the
model unit's) and `build` (`agreement_report`, which puts them together).
"""

from mheval.analysis.agree.build import agreement_report
from mheval.analysis.agree.inputs import JUDGE_COLUMNS
from mheval.analysis.agree.report import MODEL_STATS, UNITS, AgreementReport, Block

__all__ = ["JUDGE_COLUMNS", "MODEL_STATS", "UNITS", "AgreementReport", "Block", "agreement_report"]
