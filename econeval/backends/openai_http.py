"""Hosted models behind an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions).

Only the standard library is used (urllib). Generation is greedy (temperature 0). Option scores
come from the top log-probabilities of one generated token (at most 20, as OpenAI returns):
tokens are stripped of non-alphanumerics (" C" counts as "C"), the max over duplicates kept; an
option outside the top list gets no score (probability 0), as in the STEER-ME authors' scoring.
A server that returns no log-probabilities gets its generated text passed on instead (TEXT_ONLY),
so scorers read the answer from the text and report calibration as unavailable.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
import urllib.request
from typing import Sequence

from .. import registry
from ..config import ModelSpec
from ..errors import ModelError, UsageError
from ..types import BackendInfo, Completion, Generate, OptionLogprobs, OptionScores

TOP_LOGPROBS = 20
RETRIES = 3


@registry.backend("openai")
class OpenAIHTTPBackend:
    @staticmethod
    def validate(spec: ModelSpec, load) -> None:
        if not spec.base_url or not spec.api_model:
            raise UsageError(f"model '{spec.name}' (kind openai) needs base_url and api_model")
        if load.n_gpu_layers is not None:
            raise UsageError("--n-gpu-layers applies to local GGUF models only")
        if spec.api_key_env and not os.environ.get(spec.api_key_env):
            raise ModelError(f"model '{spec.name}' needs an API key in the environment variable {spec.api_key_env}")

    def __init__(self, spec: ModelSpec, load=None, timeout: float = 120.0):
        from . import LoadOptions

        load = load or LoadOptions()
        self.validate(spec, load)
        self.spec, self.timeout, self.seed = spec, timeout, load.seed
        self.base = spec.base_url.rstrip("/")
        self.key = os.environ.get(spec.api_key_env, "") if spec.api_key_env else ""
        self.use_chat = spec.chat == "on"
        self.n_requests = 0

    def _post(self, path: str, body: dict) -> dict:
        data = json.dumps({"model": self.spec.api_model, **body}).encode()
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        for attempt in range(RETRIES):
            req = urllib.request.Request(self.base + path, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    self.n_requests += 1
                    return json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:200]
                if exc.code == 400 and "context" in detail.lower():
                    return {"context_overflow": True}
                if exc.code in (429, 500, 502, 503, 504) and attempt + 1 < RETRIES:
                    time.sleep(0.5 * 2 ** attempt)
                    continue
                raise ModelError(f"{self.base}{path} answered HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                if attempt + 1 < RETRIES:
                    time.sleep(0.5 * 2 ** attempt)
                    continue
                raise ModelError(f"cannot reach {self.base}: {getattr(exc, 'reason', exc)}",
                                 hint="check base_url in models.toml and that the server is running") from None
            except json.JSONDecodeError:
                raise ModelError(f"{self.base}{path} did not answer JSON") from None
        raise AssertionError("unreachable")

    def _complete(self, prompt: str, chat: bool, **kw) -> dict:
        if chat and self.use_chat:
            body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0, "seed": self.seed, **kw}
            if "logprobs" in kw:
                body["logprobs"], body["top_logprobs"] = True, kw["logprobs"]
            return self._post("/v1/chat/completions", body)
        return self._post("/v1/completions", {"prompt": prompt, "temperature": 0, "seed": self.seed, **kw})

    def generate(self, requests: Sequence[Generate]) -> list[Completion]:
        out = []
        for r in requests:
            resp = self._complete(r.prompt, r.chat, max_tokens=r.max_tokens, **({"stop": list(r.stop)} if r.stop and r.stop_after_text else {}))
            if resp.get("context_overflow"):
                out.append(Completion(text="", finish="context"))
                continue
            choice = resp["choices"][0]
            text = choice.get("text") if "text" in choice else choice["message"]["content"]
            if r.stop and not r.stop_after_text:
                hits = [i for i in (text.find(s) for s in r.stop) if i >= 0]
                text = text[: min(hits)] if hits else text
            usage = resp.get("usage") or {}
            out.append(Completion(text=text or "", n_prompt_tokens=usage.get("prompt_tokens", 0),
                                  n_tokens=usage.get("completion_tokens", 0),
                                  finish="stop" if choice.get("finish_reason") == "stop" else "length"))
        return out

    def option_logprobs(self, requests: Sequence[OptionLogprobs]) -> list[OptionScores]:
        out = []
        for r in requests:
            resp = self._complete(r.prompt, r.chat, max_tokens=1, logprobs=TOP_LOGPROBS)
            if resp.get("context_overflow"):
                out.append(OptionScores(fits=False))
                continue
            top = _top_logprobs(resp["choices"][0])
            if not top:  # the server returns no log-probabilities: hand back the text instead
                choice = resp["choices"][0]
                text = choice.get("text") if "text" in choice else choice["message"]["content"]
                out.append(OptionScores(text=text or ""))
                continue
            if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in top.values()):
                out.append(OptionScores(error=f"the server returned non-finite log-probabilities ({self.base})"))
                continue
            scores: dict = {}
            for token, lp in top.items():
                key = "".join(ch for ch in token if ch.isalnum())
                for opt in r.options:
                    if key and key == "".join(ch for ch in opt if ch.isalnum()):
                        scores[opt] = max(scores.get(opt, float("-inf")), lp)
            out.append(OptionScores(scores=scores, top=max(top.values())))
        return out

    def info(self) -> BackendInfo:
        return BackendInfo(
            kind=self.kind,
            model={"name": self.spec.name, "api_model": self.spec.api_model, "base_url": self.base,
                   "source": self.spec.source, "sha256": None,
                   "identity": {"base_url": self.base, "api_model": self.spec.api_model}},
            n_ctx=None, device="remote", schedule="server-side (not controlled by econeval)",
            chat_template_applied=self.use_chat,
            details={"backend": "OpenAI-compatible HTTP API",
                     "decoding": "temperature 0 on the server; option scores from the top-20 log-probabilities of one token"},
        )

    def counters(self) -> dict[str, int]:
        return {"requests": self.n_requests}


def _top_logprobs(choice: dict) -> dict[str, float]:
    lp = choice.get("logprobs") or {}
    if "top_logprobs" in lp and lp["top_logprobs"]:  # completions API: [{token: logprob, ...}]
        return dict(lp["top_logprobs"][0])
    content = lp.get("content") or []  # chat API: [{"top_logprobs": [{"token", "logprob"}]}]
    return {t["token"]: t["logprob"] for t in content[0]["top_logprobs"]} if content else {}
