"""What one run gives its models: token budgets and prices. Nothing here is process-wide, so two runs in
one process (two notebook cells, two Ray actors) share nothing: each passes its own RunContext to the
models it opens."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mheval.models.limits import TokenBucket
from mheval.models.pricing import PriceTable, default_prices


@dataclass
class RunContext:
    """`tpm`: tokens-per-minute budget by model name (spec string); `prices`: the run's price table."""

    tpm: Mapping[str, float] = field(default_factory=dict)
    prices: PriceTable = field(default_factory=default_prices)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls, tpm: Mapping[str, float] | None = None, prices: str | Path | Mapping[str, Any] | None = None,
        tpm_share: int = 1,
    ) -> RunContext:  # fmt: skip
        """A run's context: its budgets (split `tpm_share` ways, for workers that each hold a part) and
        the default prices with the run's own file or entries on top."""
        table = default_prices()
        if isinstance(prices, str | Path):
            table.load(prices)
        elif prices:
            table.update(dict(prices))
        budgets = {name: max(1.0, float(v) / tpm_share) for name, v in (tpm or {}).items() if v}
        return cls(tpm=budgets, prices=table)

    def bucket(self, name: str) -> TokenBucket | None:
        """The token bucket of model `name` in this run (one per name, so two objects for one model share
        it), or None when the run gives it no budget."""
        limit = self.tpm.get(name)
        if not limit:
            return None
        bucket = self._buckets.get(name)
        if bucket is None:
            bucket = self._buckets[name] = TokenBucket(limit)
        return bucket
