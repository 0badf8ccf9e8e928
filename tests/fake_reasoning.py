"""Fake reasoning servers on 127.0.0.1 for the tests and tools/bench_reasoning.py: they reason
first and then answer, their reasoning carrying the opposite cue (EconNLI: "No" against the answer
"Yes"; EconLogicQA: "D, C, B, A" against "A, B, C, D"; STEER-ME: "B" against "A"), in each wire
format: inline `<think>` blocks, a `reasoning_content` or `reasoning` field beside the content,
OpenAI's reasoning-model contract (hidden reasoning, `max_completion_tokens`, no temperature, no
log-probabilities), Anthropic's thinking blocks, and a reasoning that never ends. Tokens are
words; the reasoning counts against the request's limit."""

from __future__ import annotations

from fake_http import JSONHandler

REASONING_WORDS = 30


def _question(text: str) -> tuple[str, str]:
    """The answer and the reasoning (its cue the opposite) for a prompt of one of the tasks."""
    if "premise" in text:
        return "Yes", " ".join(["No."] * (REASONING_WORDS - 4) + ["The", "answer", "is", "No."])
    if text.startswith("Question:") and "\nD. " in text:  # EconLogicQA's harness prompt
        return "A, B, C, D", " ".join(["order"] * (REASONING_WORDS - 4) + ["D,", "C,", "B,", "A"])
    return "A", " ".join(["hmm"] * (REASONING_WORDS - 3) + ["surely", "B", "B"])


class ReasoningServer(JSONHandler):
    fmt = "inline"  # inline | reasoning_content | reasoning | openai | endless
    seen: list = []

    def _error(self, param: str, code: str, message: str):
        self._send(400, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}})

    def do_GET(self):
        self._send(200, {"data": [{"id": "thinker", "owned_by": "vllm"}, {"id": "o4-mini", "owned_by": "openai"}]})

    def do_POST(self):
        body = self.read_json()
        type(self).seen.append((self.path, body))
        fmt = type(self).fmt
        chat = self.path == "/v1/chat/completions"
        if fmt == "openai":
            if not chat:
                return self._send(404, {"error": {"message": "This is a chat model", "code": "unknown_url"}})
            if "max_tokens" in body:
                return self._error("max_tokens", "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not "
                                   "supported with this model. Use 'max_completion_tokens' instead.")
            if "temperature" in body and body["temperature"] != 1:
                return self._error("temperature", "unsupported_value", "Unsupported value: 'temperature' does not "
                                   "support 0 with this model. Only the default (1) value is supported.")
            if body.get("logprobs"):
                return self._error("logprobs", "unsupported_parameter", "logprobs are not supported with reasoning models")
        text = body["messages"][-1]["content"] if chat else body["prompt"]
        answer, reasoning = _question(text)
        limit = body.get("max_completion_tokens", body.get("max_tokens")) or 10 ** 6
        words = reasoning.split()
        if fmt == "endless":
            words = ["more"] * (limit + 5)
        room = limit - len(words)
        answered = room >= len(answer.split()) and fmt != "endless"
        finish = "stop" if answered else "length"
        usage = {"prompt_tokens": 10, "completion_tokens": min(limit, len(words) + len(answer.split()))}
        if fmt in ("inline", "endless") or not chat:
            out = ("<think>\n" + " ".join(words) + "\n</think>\n\n" + answer).split(" ")
            content = " ".join(out[:limit]) if not answered else " ".join(out)
            choice = {"message": {"role": "assistant", "content": content}} if chat else {"text": content}
        elif fmt == "openai":
            choice = {"message": {"role": "assistant", "content": answer if answered else ""}}
            usage["completion_tokens_details"] = {"reasoning_tokens": min(limit, len(words))}
        else:  # a reasoning parser: the reasoning in its own field
            choice = {"message": {"role": "assistant", "content": answer if answered else "",
                                  fmt: " ".join(words[:limit])}}
        if body.get("logprobs") and answered is False and fmt == "inline" and not chat:
            choice["logprobs"] = {"top_logprobs": [{"<think>": -0.01, " B": -5.0}]}
        choice["finish_reason"] = finish
        self._send(200, {"model": body.get("model"), "choices": [choice], "usage": usage})


class AnthropicThinking(JSONHandler):
    seen: list = []

    def do_POST(self):
        body = self.read_json()
        AnthropicThinking.seen.append(body)
        answer, reasoning = _question(body["messages"][-1]["content"])
        blocks = [{"type": "text", "text": answer}]
        if "thinking" in body:
            assert "temperature" not in body and body["max_tokens"] > body["thinking"]["budget_tokens"]
            blocks.insert(0, {"type": "thinking", "thinking": reasoning, "signature": "x"})
        self._send(200, {"content": blocks, "stop_reason": "end_turn", "usage": {"input_tokens": 9, "output_tokens": 40}})


# what each task's parse makes of the answer, and of the reasoning's cue
ANSWERS = {"econnli-zero": "Yes", "econlogicqa-1shot": "A, B, C, D", "steer-me": "A"}
CUES = {"econnli-zero": "No", "econlogicqa-1shot": "D, C, B, A", "steer-me": "B"}


def parsed_answer(rec: dict):
    """What the task read as the answer, in the server's terms."""
    if rec["task"] == "econnli-zero":
        return {1: "Yes", 0: "No"}.get(rec.get("parsed"), rec.get("parsed"))
    if rec["task"] == "steer-me" and isinstance(rec.get("parsed"), int):
        return "ABCDEFGH"[rec["parsed"]]
    return rec.get("parsed")
