"""What a model call costs: a price table per model, in USD per million input and output tokens.

The table below is an EDITABLE DEFAULT: list prices of common hosted models on their providers'
standard tier (no batch, cached-input or long-context rates), as we knew them in 2025-08. Prices
change; check the provider's page and override what differs:

- for one run: its config's `prices:` (a YAML/JSON file, or entries `MODEL: {input: USD_PER_1M,
  output: USD_PER_1M}`), which go into that run's own table (models/context.py);
- for every run: `MHEVAL_PRICES=/path/to/prices.yaml`, read into each new table.

A key is a model id (`gpt-4o-mini`, matched for any provider that serves it under that id, with
date-stamped snapshots such as `gpt-4o-mini-2024-07-18` falling back to it) or a full spec string
(`openrouter/openai/gpt-4o-mini`), which wins over the model id.

Self-hosted models (local, vllm, ollama, llamacpp, lmstudio, sglang) cost 0 ("self_hosted"). A hosted
model with no price costs 0 too, but `price_status` says "unknown" and a warning is logged once, so a
report can say "unknown price" rather than pretend the run was free.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mheval.errors import InputError
from mheval.records import Usage

log = logging.getLogger(__name__)

PriceStatus = Literal["known", "self_hosted", "unknown"]

PRICES_AS_OF = "2025-08"
SELF_HOSTED_PROVIDERS = frozenset({"local", "vllm", "ollama", "llamacpp", "lmstudio", "sglang"})
PRICES_ENV = "MHEVAL_PRICES"


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    source: str = "default"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


# (input, output) USD per 1M tokens. EDITABLE DEFAULT: see the module docstring.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # OpenAI
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-05-13": (5.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    # Anthropic (as served through OpenRouter and other OpenAI-compatible gateways)
    "claude-opus-4": (15.00, 75.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-3-haiku": (0.25, 1.25),
    # Google
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.0-flash": (0.10, 0.40),
    "gemini-1.5-pro": (1.25, 5.00),
    "gemini-1.5-flash": (0.075, 0.30),
}

# Snapshot suffixes that do not change the price: -2024-07-18, -20241022, -0125, -latest, -001, @20240229.
_SNAPSHOT = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|latest|\d{3,4}))+$")
_AT_URL = re.compile(r"@[A-Za-z][A-Za-z0-9+.-]*://\S*$")


@dataclass(frozen=True, slots=True)
class PriceLookup:
    status: PriceStatus
    price: Price | None = None
    key: str | None = None  # the table entry that matched


class PriceTable:
    """Model prices, with a memo of lookups that is cleared whenever the table changes."""

    def __init__(self, prices: dict[str, tuple[float, float]] | None = None) -> None:
        source = DEFAULT_PRICES if prices is None else prices
        self._prices: dict[str, Price] = {k.lower(): Price(i, o) for k, (i, o) in source.items()}
        self._memo: dict[str, PriceLookup] = {}
        self._warned: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key.lower() in self._prices

    def set(self, model: str, input_per_mtok: float, output_per_mtok: float, source: str = "override") -> None:
        if input_per_mtok < 0 or output_per_mtok < 0:
            raise ValueError(f"price of {model} must not be negative")
        self._prices[model.strip().lower()] = Price(float(input_per_mtok), float(output_per_mtok), source)
        self._memo.clear()

    def update(self, prices: dict[str, Any], source: str = "override") -> None:
        """Add or replace entries: `{model: {"input": x, "output": y}}` or `{model: [x, y]}`."""
        for model, value in prices.items():
            if isinstance(value, dict):
                try:
                    pair = (value["input"], value["output"])
                except KeyError as exc:
                    raise InputError(
                        f"price of {model!r} needs 'input' and 'output' (USD per 1M tokens)", field=str(exc.args[0])
                    ) from None
            elif isinstance(value, list | tuple) and len(value) == 2:
                pair = (value[0], value[1])
            else:
                raise InputError(f"price of {model!r} must be {{input: X, output: Y}} in USD per 1M tokens")
            try:
                self.set(str(model), float(pair[0]), float(pair[1]), source)
            except (TypeError, ValueError) as exc:
                raise InputError(f"price of {model!r}: {exc}") from None

    def load(self, path: str | Path) -> None:
        """Merge a YAML or JSON file of prices into the table."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError("price file not found", path=path) from None
        try:
            if path.suffix.lower() == ".json":
                data = json.loads(text)
            else:
                from mheval.yamlio import load_yaml

                data = load_yaml(text)
        except Exception as exc:  # yaml and json raise different types; both mean "not a price file"
            raise InputError(f"cannot read price file: {exc}", path=path) from None
        if not isinstance(data, dict):
            raise InputError("a price file maps model names to {input, output}", path=path)
        self.update(data, source=str(path))

    def lookup(self, model_name: str) -> PriceLookup:
        """The price of a model spec string (`provider/model[@url]`) or a bare model id."""
        found = self._memo.get(model_name)
        if found is None:
            found = self._memo[model_name] = self._lookup(model_name)
        return found

    def _lookup(self, model_name: str) -> PriceLookup:
        name = model_name.strip().lower()
        base = _AT_URL.sub("", name)
        has_url = base != name
        provider, _, model = base.partition("/")
        if not model:
            provider, model = "", base
        for key in (name, base):
            if key in self._prices:
                return PriceLookup("known", self._prices[key], key)
        if provider in SELF_HOSTED_PROVIDERS:
            return PriceLookup("self_hosted")
        if has_url:
            # A hosted provider's name at another URL is someone's own server: its price is not the list price.
            return PriceLookup("unknown")
        candidates = [model, model.rsplit("/", 1)[-1]]
        for candidate in list(candidates):
            candidates.append(_SNAPSHOT.sub("", candidate))
        for candidate in list(candidates):
            candidates.append(candidate.replace(".", "-"))  # claude-3.5-sonnet -> claude-3-5-sonnet
        for key in candidates:
            if key in self._prices:
                return PriceLookup("known", self._prices[key], key)
        return PriceLookup("unknown")

    def cost(
        self, model_name: str, usage: Usage | None = None, *, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> float:
        """USD for `usage` (or the token counts) on `model_name`; 0 for self-hosted and unknown models."""
        if usage is not None:
            prompt_tokens, completion_tokens = usage.prompt_tokens, usage.completion_tokens
        found = self.lookup(model_name)
        if found.price is None:
            if found.status == "unknown" and model_name not in self._warned:
                self._warned.add(model_name)
                log.warning(
                    "unknown price for %s: its cost is counted as 0 (set one in the run's prices or with %s)",
                    model_name,
                    PRICES_ENV,
                )
            return 0.0
        return found.price.cost(prompt_tokens, completion_tokens)


def default_prices() -> PriceTable:
    """A new table of the built-in prices, plus the file named by MHEVAL_PRICES if set. Each call gives
    a table of its own: a run changes its own (models/context.py), never another run's."""
    table = PriceTable()
    path = os.environ.get(PRICES_ENV)
    if path:
        table.load(path)
    return table


_defaults: PriceTable | None = None


def _shared_defaults() -> PriceTable:
    """The defaults, read once, for the lookups below (which never change a table)."""
    global _defaults
    if _defaults is None:
        _defaults = default_prices()
    return _defaults


def cost_of(model_name: str, usage: Usage) -> float:
    """USD that `usage` cost on `model_name`; 0.0 for self-hosted models and for unknown prices
    (see `price_status` to tell those apart)."""
    return _shared_defaults().cost(model_name, usage)


def price_status(model_name: str) -> PriceStatus:
    """ "known", "self_hosted" (costs nothing per token) or "unknown" (counted as 0: say so in reports)."""
    return _shared_defaults().lookup(model_name).status


__all__ = [
    "DEFAULT_PRICES",
    "PRICES_AS_OF",
    "Price",
    "PriceLookup",
    "PriceTable",
    "cost_of",
    "default_prices",
    "price_status",
]
