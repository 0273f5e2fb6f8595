"""Which developer family a model belongs to, by its name: a judge of the same family as the model it
would judge is left out with `leave_own_model_out` (self-preference), in runs and in `mheval agree`."""

from __future__ import annotations

import re

# Hosting providers and data sources: the first segment of a name that says where a model runs or which
# dataset a reply came from, not who made the model.
_HOSTS = frozenset({
    "openrouter", "together", "groq", "vllm", "ollama", "llamacpp", "lmstudio", "sglang", "local", "fireworks",
    "hf", "huggingface", "azure", "bedrock", "vertex", "test", "mentalalign", "help-harm", "dialogue-safety",
    "deepinfra", "perplexity", "anyscale", "replicate", "cloudflare", "nvidia-nim", "sambanova", "cerebras",
})  # fmt: skip

# Developer families: a name belongs to every family whose pattern it matches (a distilled model belongs to
# both its teacher's and its base model's family, e.g. DeepSeek-R1-Distill-Qwen). First-party provider
# prefixes (openai/, anthropic/, google/ ...) also name the family.
FAMILIES: dict[str, str] = {
    "openai": r"gpt|chatgpt|davinci|(?:^|[/_\-\s])o[1-9](?:$|[/_\-\s])|openai",
    "anthropic": r"claude|anthropic",
    "google": r"gemini|gemma|palm|bard|google",
    "meta": r"llama|meta-llama|(?:^|[/_\-])meta(?:$|[/_\-])",
    "alibaba-qwen": r"qwen|qwq|alibaba",
    "deepseek": r"deepseek|(?:^|[/_\-])ds[_\-]",
    "mistral": r"mistral|mixtral|codestral|ministral|pixtral|magistral|devstral",
    "microsoft": r"(?:^|[/_\-])phi[_\-]?\d|wizardlm|orca|microsoft",
    "xai": r"grok|x-ai|xai",
    "cohere": r"command-r|command-a|(?:^|[/_\-])aya|cohere",
    "zhipu": r"glm|zhipu",
    "moonshot": r"kimi|moonshot",
    "01-ai": r"(?:^|[/_\-])yi[_\-]|01-ai",
    "minimax": r"minimax|abab",
    "baidu": r"ernie|baidu",
    "bytedance": r"doubao|bytedance",
    "tencent": r"hunyuan|tencent",
    "internlm": r"internlm|intern-",
    "baichuan": r"baichuan",
    "huggingface": r"smollm|zephyr|huggingfaceh4",
    "nvidia": r"nemotron|nvidia",
    "ibm": r"granite|ibm",
    "amazon": r"(?:^|[/_\-])nova[_\-]|titan|amazon",
    "ai21": r"jamba|ai21",
    "allenai": r"olmo|tulu|allenai",
}
_FAMILY_RES = {family: re.compile(pattern, re.IGNORECASE) for family, pattern in FAMILIES.items()}


def _model_part(name: str) -> str:
    """`openrouter/anthropic/claude-3.5@https://...` -> `anthropic/claude-3.5`."""
    text = name.split("@", 1)[0].strip().lower()
    parts = [p for p in text.split("/") if p]
    while len(parts) > 1 and parts[0] in _HOSTS:
        parts = parts[1:]
    return "/".join(parts)


def model_families(name: str) -> frozenset[str]:
    """The developer families of a model or judge name (empty when unknown; see FAMILIES)."""
    part = _model_part(name)
    return frozenset(f for f, regex in _FAMILY_RES.items() if regex.search(part))


def same_family(judge_name: str, model_name: str) -> bool:
    """True when the judge shares a developer family with the judged model (or is the same model).

    Examples: openai/gpt-4o judging openai/gpt-4o-mini, o4-mini judging mentalalign/gpt4omini,
    openrouter/anthropic/claude-3.7-sonnet judging anthropic/claude-3-haiku, a deepseek judge
    judging DeepSeek-R1-Distill-Qwen. Unknown families never match unless the names are the same.
    """
    if _model_part(judge_name) == _model_part(model_name):
        return True
    return bool(model_families(judge_name) & model_families(model_name))


__all__ = ["FAMILIES", "model_families", "same_family"]
