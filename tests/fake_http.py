"""A JSON HTTP handler and server on 127.0.0.1 for the tests' fake model servers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JSONHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def read_json(self) -> dict:
        n = int(self.headers["Content-Length"])
        data = self.rfile.read(n)
        if len(data) < n:  # the client hung up before its body (it gave up on the run): nothing to answer
            raise ConnectionAbortedError("the client closed the connection before sending its body")
        return json.loads(data)

    def _send(self, code, doc, headers=None):
        self._send_raw(code, json.dumps(doc).encode(), headers)

    def _send_raw(self, code, data, headers=None):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    # the listen backlog: socketserver's 5 drops the SYNs of a run's concurrent requests beyond it
    # when the accepting thread waits for the GIL, and a dropped SYN is retried after a second
    request_queue_size = 128
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that hung up (a run stopping on its first failure closes the requests it still
        has in flight) is not the server's error: no traceback on the tests' stderr for it."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def serve(handler) -> tuple[ThreadingHTTPServer, str]:
    """Start `handler` on a free port of 127.0.0.1: (server, base URL); call server.shutdown()."""
    srv = _Server(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"
