"""A stand-in for a serving engine on 127.0.0.1, to measure and test econeval's concurrency: an
OpenAI-compatible /v1/models, /v1/completions and /v1/chat/completions whose answers come from
the prompt alone (a run gives the same answers at any concurrency) and whose latency follows a
kind of server, with n the requests in flight when a request arrives (itself included). It also
speaks OpenAI's Responses API (/v1/responses, `responses()`), as a reasoning model there answers:
see that function.

Latency by kind:

- batching: base·w + k·max(0, n − knee) seconds, as a server with `knee` slots that batches them
  (vLLM, `llama-server --parallel N`): throughput rises with n up to the knee; past it, flat when
  k = base/knee (the default: the extra requests queue), falling when k is larger.
- serial: one request at a time, base·w seconds each, the others queued (llama-cpp-python's server).
- overload: as batching, but a request beyond `limit` in flight is answered 429 with Retry-After
  (a gateway's or TGI's max_concurrent_requests, a hosted API's rate limit).

w, in [0.5, 1.5], comes from a hash of the prompt: items differ, the same item never does. The
server counts what it saw: requests, the most in flight at once, 429s.

    python tools/served_standin.py --kind batching --base 0.2 --knee 32   # serves until ^C
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KINDS = ("batching", "serial", "overload")


@dataclass
class Stats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    refused: int = 0  # 429s
    arrivals: list[int] = field(default_factory=list)  # in flight at each arrival, in order
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Shape:
    kind: str = "batching"
    base: float = 0.2  # seconds of one request alone (w = 1)
    knee: int = 32
    k: float | None = None  # seconds per request in flight past the knee (None: base / knee)
    limit: int = 64  # overload: requests in flight beyond this get 429
    model: str = "standin"
    owner: str = "standin"  # /v1/models' owned_by: "vllm" or "sglang" answers as those engines do

    def slope(self) -> float:
        return self.base / self.knee if self.k is None else self.k


def weight(prompt: str) -> float:
    return 0.5 + hashlib.sha256(prompt.encode()).digest()[1] / 255


def answer(body: dict, model: str) -> dict:
    """A completion from the prompt alone: " Yes" or " No", with log-probabilities when asked."""
    chat = "messages" in body
    prompt = body["messages"][-1]["content"] if chat else body.get("prompt", "")
    yes = hashlib.sha256(prompt.encode()).digest()[0] % 2 == 0
    text = " Yes" if yes else " No"
    top = {" Yes": -0.2 if yes else -1.9, " No": -1.9 if yes else -0.2}
    if chat:
        choice: dict = {"message": {"role": "assistant", "content": text.strip()}, "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": text, "logprob": top[text],
                                               "top_logprobs": [{"token": t, "logprob": v} for t, v in top.items()]}]}
    else:
        choice = {"text": text, "finish_reason": "stop"}
        if body.get("logprobs"):
            choice["logprobs"] = {"top_logprobs": [top]}
    return {"object": "text_completion", "model": model, "choices": [choice], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}


# ---- the Responses API (/v1/responses), as OpenAI's API reference describes it --------------------
REASONING_TOKENS = 24  # what the model reasons before each answer: hidden, counted in usage
EFFORTS = ("low", "medium", "high")
MIN_OUTPUT_TOKENS = 16  # the API's least max_output_tokens
# what the API takes; what a reasoning model refuses of it (sampling); what is not a parameter of this API at all
RESPONSES_FIELDS = ("model", "input", "instructions", "max_output_tokens", "reasoning", "store", "metadata", "text", "stream",
                    "background", "previous_response_id", "include", "truncation", "user", "service_tier", "tools",
                    "tool_choice", "parallel_tool_calls", "top_logprobs", "temperature", "top_p")
UNSUPPORTED = ("temperature", "top_p", "top_logprobs")


def _refusal(message: str, param: str | None, code: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def responses(body: dict, model: str) -> tuple[int, dict]:
    """(status, document) for a POST /v1/responses of a reasoning model: the request checked as the
    API checks it (a field it does not know, a sampling field a reasoning model refuses, a
    max_output_tokens below 16, an effort the model does not take: 400 naming it); then
    REASONING_TOKENS of hidden reasoning (a `reasoning` output item with an empty summary, its
    tokens in usage.output_tokens_details.reasoning_tokens) and the answer of `answer()` as a
    `message` item holding one `output_text` part. Reasoning and answer share max_output_tokens:
    past it, status "incomplete" (incomplete_details.reason "max_output_tokens"), with the
    reasoning item alone when the reasoning used it all."""
    unknown = [k for k in body if k not in RESPONSES_FIELDS]
    if unknown:
        return 400, _refusal(f"Unknown parameter: '{unknown[0]}'.", unknown[0], "unknown_parameter")
    refused = [k for k in UNSUPPORTED if k in body]
    if refused:
        return 400, _refusal(f"Unsupported parameter: '{refused[0]}' is not supported with this model.", refused[0],
                             "unsupported_parameter")
    limit = body.get("max_output_tokens")
    if limit is not None and (not isinstance(limit, int) or limit < MIN_OUTPUT_TOKENS):
        return 400, _refusal(f"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= "
                             f"{MIN_OUTPUT_TOKENS}, but got {limit} instead.", "max_output_tokens", "integer_below_min_value")
    effort = (body.get("reasoning") or {}).get("effort")
    if effort is not None and effort not in EFFORTS:
        return 400, _refusal(f"Unsupported value: 'reasoning.effort' does not support '{effort}' with this model. Supported "
                             f"values are: {', '.join(repr(e) for e in EFFORTS)}.", "reasoning.effort", "unsupported_value")
    given = body.get("input")
    messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict) or \
            not isinstance(messages[-1].get("content"), str):
        return 400, _refusal("Invalid 'input': expected a string or a list of input items.", "input", "invalid_type")
    text = answer({"messages": messages}, model)["choices"][0]["message"]["content"]
    limit = limit if limit is not None else 10 ** 6
    reasoning = min(REASONING_TOKENS, limit)
    complete = REASONING_TOKENS + 1 <= limit
    output: list[dict] = [{"id": "rs_standin", "type": "reasoning", "summary": []}]
    if complete:
        output.append({"id": "msg_standin", "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": text, "annotations": []}]})
    used = reasoning + (1 if complete else 0)
    return 200, {"id": "resp_standin", "object": "response", "created_at": 1767225600, "model": model,
                 "status": "completed" if complete else "incomplete",
                 "incomplete_details": None if complete else {"reason": "max_output_tokens"}, "error": None,
                 "max_output_tokens": body.get("max_output_tokens"),
                 "reasoning": {"effort": effort or "medium", "summary": None}, "output": output,
                 "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": used,
                           "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": 5 + used}}


def handler(shape: Shape, stats: Stats) -> type[BaseHTTPRequestHandler]:
    serial = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: one connection per request in flight, as a real server

        def log_message(self, *args):
            pass

        def _send(self, code: int, doc: dict, headers: dict | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": shape.model, "object": "model", "owned_by": shape.owner}]})
            self._send(404, {"error": {"message": "not found"}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stats.lock:
                stats.requests += 1
                stats.in_flight += 1
                n = stats.in_flight
                stats.max_in_flight = max(stats.max_in_flight, n)
                stats.arrivals.append(n)
            try:
                if shape.kind == "overload" and n > shape.limit:
                    with stats.lock:
                        stats.refused += 1
                    return self._send(429, {"error": {"message": "overloaded", "type": "rate_limit"}}, {"Retry-After": "0.05"})
                prompt = json.dumps(body.get("messages") or body.get("prompt") or body.get("input"))
                w = weight(prompt)
                if shape.kind == "serial":
                    with serial:
                        time.sleep(shape.base * w)
                else:
                    time.sleep(shape.base * w + shape.slope() * max(0, n - shape.knee))
                if self.path.rstrip("/") == "/v1/responses":
                    return self._send(*responses(body, shape.model))
                self._send(200, answer(body, shape.model))
            finally:
                with stats.lock:
                    stats.in_flight -= 1

    return Handler


class _Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the listen backlog: hundreds of connections open at once
    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):  # a client that hung up
            return
        super().handle_error(request, client_address)


def serve(shape: Shape) -> tuple[ThreadingHTTPServer, str, Stats]:
    """Start a stand-in on a free port of 127.0.0.1: (server, base URL, its stats); call server.shutdown()."""
    if shape.kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}")
    stats = Stats()
    srv = _Server(("127.0.0.1", 0), handler(shape, stats))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}", stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=KINDS, default="batching")
    ap.add_argument("--base", type=float, default=0.2)
    ap.add_argument("--knee", type=int, default=32)
    ap.add_argument("--k", type=float, default=None)
    ap.add_argument("--limit", type=int, default=64)
    ap.add_argument("--model", default="standin")
    args = ap.parse_args()
    srv, url, stats = serve(Shape(args.kind, args.base, args.knee, args.k, args.limit, args.model))
    print(f"{args.kind} stand-in at {url}/v1 (model {args.model}); ^C stops it", flush=True)
    try:
        while True:
            time.sleep(10)
            print(f"requests {stats.requests}, most in flight {stats.max_in_flight}, 429s {stats.refused}", flush=True)
    except KeyboardInterrupt:
        srv.shutdown()


if __name__ == "__main__":
    main()
