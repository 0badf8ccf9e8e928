"""Fake model servers that speak the wire formats reasoning models arrive in, as each server's
and provider's documentation describes them, for tests/test_reasoning_formats.py and
tools/bench_reasoning.py. Every model reasons first with the opposite cue at the reasoning's
start (EconNLI: "No." against the answer "Yes"; EconLogicQA: "D, C, B, A" against "A, B, C, D";
STEER-ME: "B" against "A"), then answers: a misread shows as the cue.

Tokens are words and markers; the reasoning counts against the request's limit. What each format
does (`Fmt`):

- `family`: how the model writes its reasoning: "think" (it emits `<think>` … `</think>` itself:
  Qwen3, Nemotron), "opened" (the chat template ends the prompt with `<think>\\n`, so the reply
  holds only `</think>`: DeepSeek-R1 distills, QwQ, Qwen3-2507-Thinking, Qwen3.5), "granite"
  (Granite 3.2's phrases "Here is my thought process:" … "Here is my response:"), "seed"
  (`<seed:think>` … `</seed:think>`), "magistral" (`[THINK]` … `[/THINK]`, special tokens),
  "harmony" (gpt-oss: `<|channel|>analysis<|message|>` … `<|end|><|start|>assistant<|channel|>final
  <|message|>`, special tokens), "kimi" (`◁think▷` … `◁/think▷`), "hidden" (reasoning the server
  counts and never shows), None (no reasoning).
- `parser` (chat only; raw completions are never parsed): "r1" (vLLM deepseek_r1, llama.cpp
  `--reasoning-format deepseek`: opener optional, no closer → all reasoning), "end" (vLLM's qwen3
  parser: no closer → all content), "both" (the older qwen3 parser and vLLM's granite parser:
  both markers needed, else all content), "harmony" (the analysis channel is the reasoning),
  None (no parser: the text as generated, special tokens skipped where `skip_special`).
- `server`: "vllm" (`thinking_token_budget`, `skip_special_tokens`, `/tokenize`), "llamacpp"
  (`thinking_budget_tokens`, `reasoning_effort: none`, `/apply-template`), "ollama" (ignores
  `chat_template_kwargs`; its chat switch is `reasoning_effort` / `reasoning.effort`, "none"
  stopping the thinking, as its OpenAI-compatibility page documents; its /v1/completions thinks
  and drops the thinking), "openai" (the reasoning-model contract, effort per model, the
  Responses API for -pro models), "anthropic" (thinking blocks; `budget_tokens` or adaptive
  thinking per model; `display` omitted: blocks with empty text and a signature), "sglang" (no
  `skip_special_tokens` sent: special tokens dropped).
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass

from fake_http import JSONHandler

REASONING_WORDS = 30


# ---- the questions -----------------------------------------------------------------------------
def question(text: str) -> tuple[list[str], list[str], str, str]:
    """(answer tokens, reasoning tokens, the answer's option token, the cue's option token)."""
    if "premise" in text:
        head = ["No.", " The", " premise", " says", " no."]
        return ["Yes"], head + [" hmm"] * (REASONING_WORDS - len(head)), "Yes", "No"
    if text.startswith("Question:") and "\nD. " in text:  # EconLogicQA's harness prompt
        head = ["D,", " C,", " B,", " A"]
        return ["A,", " B,", " C,", " D"], head + [" order"] * (REASONING_WORDS - len(head)), "A", "D"
    head = ["B", " is", " it."]
    return ["A"], head + [" hmm"] * (REASONING_WORDS - len(head)), "A", "B"


# what each task's parse makes of the answer, and of the reasoning's cue
ANSWERS = {"econnli-zero": "Yes", "econlogicqa-1shot": "A, B, C, D", "steer-me": "A"}
CUES = {"econnli-zero": "No", "econlogicqa-1shot": "D, C, B, A", "steer-me": "B"}


def reads(rec: dict) -> list[tuple[str, object]]:
    """What the task read from a sample, in the server's terms: (reading, value); EconNLI's option
    log-probabilities are a reading of their own ("econnli-lp")."""
    task = rec["task"]
    if task == "econnli-zero":
        out: list[tuple[str, object]] = [(task, {1: "Yes", 0: "No"}.get(rec.get("parsed"), rec.get("parsed")))]
        if "logprob_pred" in rec:
            out.append(("econnli-lp", {1: "Yes", 0: "No"}[rec["logprob_pred"]]))
        return out
    if task == "steer-me":
        p = rec.get("parsed")
        return [(task, "ABCDEFGH"[p] if isinstance(p, int) else p)]
    return [(task, rec.get("parsed"))]


def tally(records: list[dict]) -> dict:
    """Readings from the answer, from the reasoning (the cue), unanswered, other; EconNLI's option
    readings (`lp`: from the answer / from the reasoning)."""
    out = {"answer": 0, "reasoning": 0, "unanswered": 0, "other": 0, "lp_answer": 0, "lp_reasoning": 0, "items": 0}
    for rec in records:
        out["items"] += 1
        for name, value in reads(rec):
            task = "econnli-zero" if name == "econnli-lp" else name
            pre = "lp_" if name == "econnli-lp" else ""
            if value is None:
                out["unanswered"] += 1
            elif value == ANSWERS[task]:
                out[pre + "answer"] += 1
            elif value == CUES[task]:
                out[pre + "reasoning"] += 1
            else:
                out["other"] += 1
    return out


# ---- the formats ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fmt:
    model: str
    server: str = "vllm"  # vllm | llamacpp | ollama | openai | anthropic | another (its owned_by)
    family: str | None = "think"
    parser: str | None = None
    field: str = "reasoning"  # the reasoning field: reasoning (vLLM >= 0.10, Ollama) | reasoning_content
    default: bool = True  # reasons when nothing is switched (chat)
    off: tuple = ()  # chat_template_kwargs (name, value) that stop it
    on: tuple = ()  # ... that start it
    skip_special: bool = True  # the server drops special tokens from the text unless asked not to
    effort_none: bool = False  # OpenAI: accepts reasoning_effort "none" (GPT-5.1 and later: its default)
    efforts: tuple = ("low", "medium", "high")
    responses_only: bool = False  # OpenAI -pro models
    # classic (budget_tokens) | adaptive (adaptive thinking, temperature refused) | always (thinks unless disabled, which
    # it refuses) | omitted (adaptive, thinks by default, its thinking display omitted: empty text and a signature)
    claude: str = "classic"
    raw_family: str | None = "same"  # what a raw prompt on /v1/completions does ("same": the family, emitting its opener)
    only: str | None = None  # reasons only on prompts holding this text (a model that reasons on some questions)
    refused: tuple = ()  # request fields the server answers 400 for (a gateway in front of the engine)


MARKS = {  # family: (opener tokens, closer tokens, after the closer); special tokens in SPECIAL
    "think": (["<think>", "\n"], ["\n", "</think>"], ["\n\n"]),
    "opened": ([], ["\n", "</think>"], ["\n\n"]),
    "granite": (["Here is my thought process:", "\n"], ["\n", "Here is my response:"], ["\n"]),
    "seed": (["<seed:think>"], ["</seed:think>"], []),
    "magistral": (["[THINK]"], ["[/THINK]"], []),
    "harmony": (["<|channel|>", "analysis", "<|message|>"],
                ["<|end|>", "<|start|>", "assistant", "<|channel|>", "final", "<|message|>"], []),
    "kimi": (["◁think▷"], ["◁/think▷"], []),
    "custom": (["<reasoning>"], ["</reasoning>"], ["\n"]),  # a family econeval does not know (-M think_end)
}
SPECIAL = {"[THINK]", "[/THINK]", "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>"}
OPENERS = {"think": "<think>", "opened": "<think>", "granite": "Here is my thought process:", "seed": "<seed:think>",
           "magistral": "[THINK]", "kimi": "◁think▷", "custom": "<reasoning>"}
CLOSERS = {"think": "</think>", "opened": "</think>", "granite": "Here is my response:", "seed": "</seed:think>",
           "magistral": "[/THINK]", "kimi": "◁/think▷", "custom": "</reasoning>"}


def _limit(body: dict) -> int:
    for k in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        if isinstance(body.get(k), int):
            return body[k]
    return 10 ** 6


class FormatServer(JSONHandler):
    """One format at a time: set `fmt` (and reset `seen`) before a run."""

    fmt: Fmt = Fmt("thinker")
    seen: list = []  # (path, body, status) of every request
    fail: object = None  # a predicate on the prompt: answer HTTP 500 (a run cut off, to be resumed)
    lock = threading.Lock()

    # ---- plumbing ----
    def _log(self, body, status):
        with FormatServer.lock:
            type(self).seen.append((self.path, body, status))

    def _reply(self, body, status, doc):
        self._log(body, status)
        self._send(status, doc)

    def _openai_error(self, body, status, message, param=None, code=None):
        self._reply(body, status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})

    def do_GET(self):
        f = type(self).fmt
        owner = {"ollama": "library"}.get(f.server, f.server)
        self._send(200, {"object": "list", "data": [{"id": f.model, "object": "model", "owned_by": owner}]})

    def do_POST(self):
        body = self.read_json()
        f = type(self).fmt
        path = self.path
        if path == "/apply-template" and f.server == "llamacpp":
            return self._reply(body, 200, {"prompt": self._template(body)})
        if path == "/tokenize" and f.server == "vllm" and "messages" in body:
            strs = [("Ċ" if t == "\n" else t) for t in re.findall(r"<[^>]+>|\n|[^<\n]+", self._template(body))]
            return self._reply(body, 200, {"count": len(strs), "max_model_len": 32768, "tokens": list(range(len(strs))),
                                           "token_strs": strs if body.get("return_token_strs") else None})
        if f.server == "anthropic":
            if path == "/v1/messages" and type(self).fail is not None and type(self).fail(body["messages"][-1]["content"]):  # type: ignore[operator]
                return self._reply(body, 500, {"type": "error", "error": {"type": "api_error", "message": "internal error"}})
            return self._anthropic(body) if path == "/v1/messages" else self._reply(body, 404, {"type": "error", "error": {
                "type": "not_found_error", "message": f"Not found: {path}"}})
        if path == "/v1/responses" and f.server == "openai":
            return self._responses(body)
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return self._reply(body, 404, {"error": {"message": f"Not Found: {path}", "code": 404}})
        chat = path == "/v1/chat/completions"
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        if type(self).fail is not None and type(self).fail(prompt):  # type: ignore[operator]
            return self._reply(body, 500, {"error": {"message": "internal error", "code": 500}})
        unknown = [k for k in f.refused if k in body]
        if unknown:
            return self._openai_error(body, 400, f"Unrecognized request argument supplied: '{unknown[0]}'")
        if f.server == "openai":
            refused = self._openai_contract(body, chat)
            if refused:
                return refused
        return self._complete(body, chat, prompt)

    # ---- the model ----
    def _reasons(self, body: dict, chat: bool) -> bool:
        f = type(self).fmt
        if f.family is None:
            return False
        if f.server == "openai":
            effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
            return effort != "none" if effort else not f.effort_none
        if not chat:
            return f.default
        kwargs = {} if f.server == "ollama" else dict(body.get("chat_template_kwargs") or {})
        effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
        if f.server == "ollama" and effort == "none":
            return False
        if f.server == "llamacpp" and effort == "none":
            kwargs.setdefault("enable_thinking", False)
        if any(kwargs.get(k, object()) == v for k, v in f.off):
            return False
        if any(kwargs.get(k, object()) == v for k, v in f.on):
            return True
        return f.default

    def _template(self, body: dict) -> str:
        """The generation prompt as the chat template renders it (its tail is what matters)."""
        f = type(self).fmt
        head = "<|im_start|>user\n" + str(body["messages"][-1].get("content", "")) + "<|im_end|>\n<|im_start|>assistant\n"
        if f.family == "opened":
            return head + ("<think>\n" if self._reasons(body, True) else "<think>\n\n</think>\n\n")
        if f.family == "think" and not self._reasons(body, True) and f.off:
            return head + "<think>\n\n</think>\n\n"
        return head

    def _tokens(self, body: dict, chat: bool, answer: list[str], reasoning: list[str]) -> tuple[list[str], int]:
        """Every token the model generates (markers included), and how many of them are reasoning."""
        f = type(self).fmt
        family = f.family if chat or f.raw_family == "same" else f.raw_family
        if family == "opened" and not chat:
            family = "think"  # no template opened it: the model opens it itself
        prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
        if not self._reasons(body, chat) or family is None or (f.only is not None and f.only not in prompt):
            return list(answer), 0
        budget = body.get("thinking_token_budget") if f.server == "vllm" else \
            body.get("thinking_budget_tokens", body.get("reasoning_budget_tokens")) if f.server == "llamacpp" and chat else None
        if isinstance(budget, int) and budget >= 0 and family in MARKS:
            reasoning = reasoning[:budget]  # the server closes the reasoning at the budget
        if family == "hidden":
            return reasoning + answer, len(reasoning)
        opener, closer, after = MARKS[family]
        tail = ["<|return|>"] if family == "harmony" else []
        return opener + reasoning + closer + after + answer + tail, len(opener) + len(reasoning) + len(closer)

    def _complete(self, body: dict, chat: bool, prompt: str):
        f = type(self).fmt
        answer, reasoning, ans_tok, cue_tok = question(prompt)
        tokens, n_reasoning = self._tokens(body, chat, answer, reasoning)
        limit = _limit(body)
        gen = tokens[:limit]
        finish = "stop" if len(tokens) <= limit else "length"
        skip = f.skip_special and body.get("skip_special_tokens", True) is not False

        def visible(toks):
            return "".join(t for t in toks if not (skip and t in SPECIAL))

        stops = body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        if stops:
            for k in range(1, len(gen) + 1):
                text = visible(gen[:k])
                if any(s and s in text for s in stops):
                    gen, finish = gen[:k - 1], "stop"
                    break
        shown = gen[n_reasoning:] if f.family == "hidden" or (f.server == "ollama" and not chat) else gen
        usage = {"prompt_tokens": 10, "completion_tokens": len(gen), "total_tokens": 10 + len(gen)}
        if f.server == "openai" and n_reasoning:
            usage["completion_tokens_details"] = {"reasoning_tokens": min(n_reasoning, len(gen))}
        if f.server == "ollama" and not chat and n_reasoning:  # thinks, drops the thinking
            shown = [t for t in gen[n_reasoning:] if t not in ("<think>", "</think>", "\n", "\n\n")]
        if chat:
            # llama.cpp's server parses reasoning only where the template left thinking on; Ollama only where it thought
            parse = f.parser and (n_reasoning or f.server not in ("llamacpp", "ollama"))
            reasoning_text, content = self._parse(gen, visible) if parse else (None, visible(shown))
            message: dict = {"role": "assistant", "content": content}
            if reasoning_text is not None:
                message[f.field] = reasoning_text
            choice: dict = {"index": 0, "message": message}
        else:
            choice = {"index": 0, "text": visible(shown)}
        if body.get("logprobs"):
            choice["logprobs"] = self._logprobs(gen, answer, ans_tok, cue_tok, chat)
        choice["finish_reason"] = finish
        self._reply(body, 200, {"id": "x", "object": "chat.completion" if chat else "text_completion", "model": f.model,
                                "choices": [choice], "usage": usage})

    def _parse(self, gen: list[str], visible) -> tuple[str | None, str | None]:
        """The server's reasoning parser over the generated tokens: (reasoning, content)."""
        f = type(self).fmt
        full = "".join(gen)
        if f.parser == "harmony":
            if "<|channel|>" not in full:
                return None, visible(gen)
            analysis, found, final = full.partition("<|channel|>final<|message|>")
            reasoning = analysis.replace("<|channel|>analysis<|message|>", "").replace("<|end|>", "").replace("<|start|>assistant", "")
            return reasoning, (final.replace("<|return|>", "") if found else None)
        opener = OPENERS.get(f.family or "", "<think>")
        closer = CLOSERS.get(f.family or "", "</think>")
        has_open, has_close = opener in full, closer in full
        if f.parser == "both" and not (has_open and has_close):
            return None, visible(gen)
        if f.parser == "end" and not has_close:
            return None, visible(gen).replace(opener, "")
        body = full.partition(opener)[2] if has_open else full
        if not has_close:
            return body.strip("\n"), None
        reasoning, _, content = body.partition(closer)
        for s in SPECIAL:
            content = content.replace(s, "") if f.skip_special else content
        return reasoning.strip("\n"), content.lstrip("\n")

    def _logprobs(self, gen: list[str], answer: list[str], ans_tok: str, cue_tok: str, chat: bool) -> dict:
        """The first generated token's top log-probabilities: the answer's position, or the
        reasoning's (where the cue leads)."""
        f = type(self).fmt
        first = gen[0] if gen else ""
        if f.server == "ollama" and not chat and first not in answer:
            first = "<think>"
        alnum = "".join(ch for ch in first if ch.isalnum())
        if first == answer[0]:
            top = {first: -0.1, cue_tok: -3.0}
        elif alnum == cue_tok:  # the reasoning opens with the cue
            top = {first: -0.1, ans_tok: -2.5}
        else:  # a marker or another word: the cue leads the options
            top = {first: -0.4, cue_tok: -1.5, ans_tok: -3.0}
        lp = top[first]
        if chat:
            return {"content": [{"token": first, "logprob": lp, "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}]}
        return {"tokens": [first], "token_logprobs": [lp], "top_logprobs": [top]}

    # ---- OpenAI ----
    def _openai_contract(self, body: dict, chat: bool):
        f = type(self).fmt
        if f.responses_only:
            return self._openai_error(body, 404, "This model is only supported in v1/responses and not in v1/chat/completions.",
                                      code=None) or True
        if not chat:
            return self._openai_error(body, 404, "This is a chat model and not supported in the v1/completions endpoint. "
                                      "Did you mean to use v1/chat/completions?", code=None) or True
        if "max_tokens" in body:
            return self._openai_error(body, 400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                      "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter") or True
        if "temperature" in body and body["temperature"] != 1:
            return self._openai_error(body, 400, "Unsupported value: 'temperature' does not support 0 with this model. Only the "
                                      "default (1) value is supported.", "temperature", "unsupported_value") or True
        if body.get("logprobs"):
            return self._openai_error(body, 400, "logprobs are not supported with reasoning models", "logprobs",
                                      "unsupported_parameter") or True
        effort = body.get("reasoning_effort")
        allowed = (("none",) if f.effort_none else ()) + tuple(f.efforts)
        if effort is not None and effort not in allowed:
            return self._openai_error(body, 400, f"Unsupported value: 'reasoning_effort' does not support '{effort}' with this "
                                      f"model. Supported values are: {', '.join(repr(a) for a in allowed)}.",
                                      "reasoning_effort", "unsupported_value") or True
        return None

    def _responses(self, body: dict):
        f = type(self).fmt
        for k in ("temperature", "max_tokens", "seed", "stop", "logprobs"):
            if k in body:
                return self._openai_error(body, 400, f"Unsupported parameter: '{k}' is not supported with this model.",
                                          k, "unsupported_parameter")
        effort = (body.get("reasoning") or {}).get("effort")
        if effort is not None and effort not in f.efforts:
            return self._openai_error(body, 400, f"Unsupported value: 'reasoning.effort' does not support '{effort}' with this "
                                      "model.", "reasoning.effort", "unsupported_value")
        given = body.get("input")
        prompt = given if isinstance(given, str) else given[-1]["content"]
        answer, reasoning, _, _ = question(prompt)
        n_reasoning = len(reasoning)
        limit = _limit(body)
        complete = n_reasoning + len(answer) <= limit
        text = "".join(answer) if complete else ""
        output = [{"type": "reasoning", "id": "rs_1", "summary": []}]
        if complete:
            output.append({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        self._reply(body, 200, {
            "id": "resp_1", "object": "response", "model": f.model, "status": "completed" if complete else "incomplete",
            "incomplete_details": None if complete else {"reason": "max_output_tokens"}, "output": output,
            "usage": {"input_tokens": 10, "output_tokens": min(limit, n_reasoning + len(answer)),
                      "output_tokens_details": {"reasoning_tokens": min(limit, n_reasoning)}}})

    # ---- Anthropic ----
    def _anthropic(self, body: dict):
        f = type(self).fmt

        def refuse(message):
            self._reply(body, 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}})

        thinking = body.get("thinking") or {}
        kind = thinking.get("type")
        if f.claude in ("adaptive", "always", "omitted") and "temperature" in body:
            return refuse("`temperature` is deprecated for this model.")
        if kind == "enabled" and f.claude in ("adaptive", "always", "omitted"):
            return refuse('"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
                          '"output_config.effort" to control thinking behavior.')
        if kind == "adaptive" and f.claude == "classic":
            return refuse("adaptive thinking is not supported on this model")
        if kind == "disabled" and f.claude == "always":
            return refuse('"thinking.type.disabled" is not supported for this model.')
        if "output_config" in body and f.claude == "classic":
            return refuse("output_config: Extra inputs are not permitted")
        if kind == "enabled":
            if thinking.get("budget_tokens", 0) < 1024:
                return refuse("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
            if body["max_tokens"] <= thinking["budget_tokens"]:
                return refuse("`max_tokens` must be greater than `thinking.budget_tokens`.")
            if "temperature" in body and body["temperature"] != 1:
                return refuse("`temperature` may only be set to 1 when thinking is enabled.")
        thinks = kind in ("enabled", "adaptive") or (f.claude in ("always", "omitted") and kind != "disabled")
        answer, reasoning, _, _ = question(body["messages"][-1]["content"])
        limit = body["max_tokens"]
        blocks: list[dict] = []
        used = 0
        if thinks:
            part = reasoning[:limit]
            used = len(part)
            blocks.append({"type": "thinking", "thinking": "" if f.claude == "omitted" else "".join(part), "signature": "sig"})
        room = limit - used
        stop = "end_turn"
        if room >= len(answer):
            blocks.append({"type": "text", "text": "".join(answer)})
            used += len(answer)
        else:
            stop = "max_tokens"
        self._reply(body, 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": f.model, "content": blocks,
                                "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": used}})


def requests_sent(seen: list) -> int:
    """Requests the model was asked to answer (a template read is not one)."""
    return sum(1 for path, _, _ in seen if path not in ("/apply-template", "/tokenize"))


def dump(seen: list) -> str:
    return "\n".join(f"{status} {path} {json.dumps(body)[:200]}" for path, body, status in seen)


# ---- the formats measured (label, Fmt, extra command-line arguments) ------------------------------
R1 = "deepseek-r1-distill-qwen-7b"
FORMATS: list[tuple[str, Fmt, tuple[str, ...]]] = [
    # chat, a server parser in its own field
    ("vLLM qwen3 parser, Qwen3 (reasoning)", Fmt("qwen3-8b", parser="end", off=(("enable_thinking", False),)), ("--chat", "on")),
    ("llama.cpp deepseek format, Qwen3 (reasoning_content)", Fmt("qwen3-8b", "llamacpp", parser="r1", field="reasoning_content",
                                                                  off=(("enable_thinking", False),)), ("--chat", "on")),
    ("vLLM deepseek_r1 parser, R1 distill (template opens)", Fmt(R1, family="opened", parser="r1"), ("--chat", "on")),
    ("vLLM deepseek_r1 parser, opaque name", Fmt("served-model", family="opened", parser="r1"), ("--chat", "on")),
    ("vLLM seed_oss parser, Seed-OSS", Fmt("seed-oss-36b", family="seed", parser="r1", off=(("thinking_budget", 0),)),
     ("--chat", "on")),
    ("vLLM mistral parser, Magistral", Fmt("magistral-small-2509", family="magistral", parser="r1"), ("--chat", "on")),
    ("vLLM gpt-oss (harmony parsed)", Fmt("gpt-oss-20b", family="harmony", parser="harmony"), ("--chat", "on")),
    ("llama.cpp gpt-oss (harmony parsed)", Fmt("gpt-oss-20b", "llamacpp", family="harmony", parser="harmony",
                                               field="reasoning_content", skip_special=False), ("--chat", "on")),
    ("Ollama chat, Qwen3 (reasoning)", Fmt("qwen3:8b", "ollama", parser="r1"), ("--chat", "on")),
    # chat, no parser (or one that needs both markers)
    ("vLLM no parser, Qwen3 inline", Fmt("qwen3-8b", off=(("enable_thinking", False),)), ("--chat", "on")),
    ("vLLM no parser, R1 distill (template opens)", Fmt(R1, family="opened"), ("--chat", "on")),
    ("llama.cpp --reasoning-format none, opaque name", Fmt("model.gguf", "llamacpp", family="opened", skip_special=False),
     ("--chat", "on")),
    ("vLLM old qwen3 parser, QwQ (template opens)", Fmt("qwq-32b", family="opened", parser="both"), ("--chat", "on")),
    ("vLLM granite parser, Granite 3.2 on", Fmt("granite-3.2-8b-instruct", family="granite", parser="both", default=False,
                                                on=(("thinking", True),)), ("--chat", "on", "--reasoning", "on")),
    ("vLLM no parser, Seed-OSS", Fmt("seed-oss-36b", family="seed", off=(("thinking_budget", 0),)), ("--chat", "on")),
    ("vLLM no parser, Magistral (markers skipped)", Fmt("magistral-small-2509", family="magistral"), ("--chat", "on")),
    ("vLLM no parser, Magistral (markers skipped), opaque name", Fmt("served-model", family="magistral"), ("--chat", "on")),
    ("SGLang no parser, Magistral (markers dropped)", Fmt("magistral-small-2509", "sglang", family="magistral"),
     ("--chat", "on")),
    ("vLLM no parser, Kimi", Fmt("kimi-vl-a3b-thinking", family="kimi"), ("--chat", "on")),
    # raw prompts on /v1/completions (the default for EconNLI and EconLogicQA)
    ("vLLM completions, Qwen3 inline", Fmt("qwen3-8b"), ()),
    ("vLLM completions, gpt-oss (specials skipped)", Fmt("gpt-oss-20b", family="harmony"), ()),
    ("Ollama completions, hidden thinking", Fmt("qwen3:8b", "ollama", family="think"), ()),
    # OpenAI and Anthropic
    ("OpenAI o4-mini by name", Fmt("o4-mini", "openai", family="hidden"), ()),
    ("OpenAI contract, unknown name, --chat on", Fmt("thinker", "openai", family="hidden"), ("--chat", "on")),
    ("OpenAI gpt-5.1 --reasoning off", Fmt("gpt-5.1", "openai", family="hidden", effort_none=True),
     ("--reasoning", "off")),
    ("OpenAI gpt-5-pro (Responses API)", Fmt("gpt-5-pro", "openai", family="hidden", responses_only=True, efforts=("high",)),
     ()),
    ("Anthropic classic, --reasoning on", Fmt("claude-sonnet-4-5", "anthropic", family="hidden", claude="classic"),
     ("--reasoning", "on")),
    ("Anthropic adaptive, auto", Fmt("claude-opus-4-7", "anthropic", family="hidden", claude="adaptive"), ()),
    ("Anthropic adaptive, --reasoning on", Fmt("claude-opus-4-7", "anthropic", family="hidden", claude="adaptive"),
     ("--reasoning", "on")),
    ("Anthropic thinks by default", Fmt("claude-fable-5", "anthropic", family="hidden", claude="always"), ()),
    ("Anthropic thinks by default, display omitted", Fmt("claude-opus-4-7", "anthropic", family="hidden", claude="omitted"), ()),
    # --reasoning off: a server's own switch, a model without one
    ("Ollama chat --reasoning off (reasoning_effort none)", Fmt("qwen3:8b", "ollama", parser="r1"),
     ("--chat", "on", "--reasoning", "off")),
    ("vLLM R1 distill --reasoning off (no switch)", Fmt(R1, family="opened", parser="r1"), ("--chat", "on", "--reasoning", "off")),
    ("vLLM Qwen3 --reasoning off (honoured)", Fmt("qwen3-8b", parser="end", off=(("enable_thinking", False),)),
     ("--chat", "on", "--reasoning", "off")),
    ("vLLM no parser, markers econeval does not know, -M think_end", Fmt("my-reasoner", family="custom"),
     ("--chat", "on", "-M", "think_end=</reasoning>")),
    ("vLLM Qwen3 --reasoning off, reasons on EconNLI only", Fmt("qwen3-8b", parser="end", only="premise"),
     ("--chat", "on", "--reasoning", "off")),
    ("reasoning past --reasoning-tokens 20", Fmt("qwen3-8b", parser="end"), ("--chat", "on", "--reasoning-tokens", "20")),
]
