"""Model spec strings: `PROVIDER/MODEL`, `PROVIDER/MODEL@BASE_URL`, and `local/smollm2` (or `local/PATH.gguf`).

A spec says where a model lives and which environment variable holds its key. It never holds
the key itself, so it can be printed, logged, stored in a run folder and used in cache keys.
"""

from __future__ import annotations

import ipaddress
import os
import re
from typing import NamedTuple
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from mheval.errors import InputError


class Provider(NamedTuple):
    base_url: str | None
    api_key_env: str | None
    key_required: bool


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY", True),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", True),
    "together": Provider("https://api.together.xyz/v1", "TOGETHER_API_KEY", True),
    "groq": Provider("https://api.groq.com/openai/v1", "GROQ_API_KEY", True),
    "deepseek": Provider("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", True),
    "ollama": Provider("http://127.0.0.1:11434/v1", None, False),
    "vllm": Provider("http://127.0.0.1:8000/v1", "VLLM_API_KEY", False),
    "llamacpp": Provider("http://127.0.0.1:8080/v1", None, False),
    "lmstudio": Provider("http://127.0.0.1:1234/v1", None, False),
    "sglang": Provider("http://127.0.0.1:30000/v1", None, False),
    # The embedded llama.cpp server (models/local.py); its URL is only known once it runs.
    "local": Provider(None, None, False),
}

LOCAL_MODELS: tuple[str, ...] = ("smollm2",)  # shipped; any GGUF file works too (models/local.py)

_UNSET = object()
# "@" only separates a base URL when a URL follows: model ids such as "claude-3@20240229" keep theirs.
_AT_URL = re.compile(r"^(?P<head>.+?)@(?P<url>[A-Za-z][A-Za-z0-9+.-]*://\S*)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelSpec(BaseModel):
    """Where a chat model lives. `name` is the canonical string used in the store and cache keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model: str
    base_url: str | None
    api_key_env: str | None = None
    key_required: bool = False

    @property
    def name(self) -> str:
        head = f"{self.provider}/{self.model}"
        if self.provider == "local":
            return head  # the port changes per run; the model does not
        default = PROVIDERS.get(self.provider)
        if default is None or default.base_url != self.base_url:
            return f"{head}@{self.base_url}"
        return head

    @property
    def is_local(self) -> bool:
        return self.provider == "local"

    @property
    def is_embedded(self) -> bool:
        """A local model with no server URL: mheval starts it inside this process (models/local.py)."""
        return self.is_local and self.base_url is None

    def api_key(self) -> str | None:
        """The key, read from the environment now (never cached on the spec)."""
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or None

    def missing_key(self) -> str | None:
        """The variable to set when a required key is absent, else None (for an early, clear CLI error)."""
        if self.key_required and self.api_key() is None:
            return self.api_key_env
        return None

    def with_base_url(self, base_url: str) -> ModelSpec:
        return self.model_copy(update={"base_url": _clean_url(base_url, self.name)})

    def __str__(self) -> str:
        return self.name


SERVE_EMBEDDED = "start its server and give its URL (local/NAME@http://HOST:PORT/v1)"
"""What to do where an embedded model cannot be started (another process's workers, an Inspect scorer)."""


# user:password@ inside a URL: a credential that would be saved with the spec in config.yaml and run.db.
URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s@]*@", re.IGNORECASE)


def refuse_url_credentials(text: str) -> None:
    """Keys belong in environment variables: a spec with credentials in its URL is refused, and the
    message does not repeat them."""
    if URL_CREDENTIALS.search(text):
        shown = URL_CREDENTIALS.sub(lambda m: m.group(0).split("://")[0] + "://***@", text)
        raise InputError(
            f"model spec {shown!r} holds credentials in its URL; remove them and put the key in the "
            "provider's environment variable (e.g. OPENAI_API_KEY), which is never written anywhere"
        )


# Hosts that are this machine or a private network: a server there (vLLM, llama.cpp, Ollama, a proxy) is the
# user's own, so no key is required (one is still sent when its variable is set).
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in ("127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "::1/128", "fc00::/7")
)


def is_private_url(url: str) -> bool:
    """Whether the URL's host is loopback (`localhost`, 127.0.0.0/8, ::1) or a private address
    (10/8, 172.16/12, 192.168/16, IPv6 unique-local). Names other than localhost are not resolved."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in PRIVATE_NETWORKS)


def _clean_url(url: str, text: str) -> str:
    if not re.match(r"^https?://[^/\s]+", url):
        raise InputError(f"model spec {text!r}: the base URL must start with http:// or https://")
    return url.rstrip("/")


def parse_model_spec(text: str, *, api_key_env: str | object | None = _UNSET) -> ModelSpec:
    """Parse `PROVIDER/MODEL[@BASE_URL]`. `api_key_env` overrides the provider's key variable
    (pass None to send no key at all)."""
    refuse_url_credentials(text)
    raw = text.strip()
    url: str | None = None
    match = _AT_URL.match(raw)
    if match:
        raw, url = match["head"], match["url"]
    provider, sep, model = raw.partition("/")
    provider = provider.strip().lower()
    model = model.strip()
    known = sorted(PROVIDERS)
    if not sep or not provider or not model:
        raise InputError(f"model spec {text!r} is not PROVIDER/MODEL or PROVIDER/MODEL@BASE_URL", choices=known)
    defaults = PROVIDERS.get(provider)
    if provider == "local" and url is None:
        # Embedded: smollm2, a configured name or a GGUF path (models/local.py). With a URL, it is a
        # llama.cpp server the user started, and any model name goes.
        from mheval.models.local import canonical_local_model

        model = canonical_local_model(model)
    elif defaults is None and url is None:
        raise InputError(
            f"unknown model provider {provider!r} in {text!r}; "
            "use a known provider or give the server as PROVIDER/MODEL@BASE_URL",
            choices=known,
        )
    base_url = _clean_url(url, text) if url is not None else (defaults.base_url if defaults else None)
    key_env = defaults.api_key_env if defaults else None
    key_required = defaults.key_required if defaults else False
    if url is not None and is_private_url(base_url or ""):
        key_required = False  # the user's own server: a key is sent if set, never demanded
    if api_key_env is not _UNSET:
        if api_key_env is not None and not (isinstance(api_key_env, str) and _ENV_NAME.match(api_key_env)):
            raise InputError(f"api_key_env {api_key_env!r} is not an environment variable name")
        key_env = api_key_env
        key_required = key_required and api_key_env is not None
    return ModelSpec(provider=provider, model=model, base_url=base_url, api_key_env=key_env, key_required=key_required)
