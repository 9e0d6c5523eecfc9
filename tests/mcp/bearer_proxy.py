"""Forwards HTTP requests to an MCP endpoint, adding `Authorization: Bearer TOKEN`.

The MCP conformance suite (npm `@modelcontextprotocol/conformance`) connects without
credentials and has no option to send any; Argos's `/mcp` admits only API tokens. This
proxy changes nothing else: method, path, every other header (Host and Origin included, so
the suite's DNS-rebinding checks reach the gateway as sent) and both bodies pass as they
are, the answer streamed back chunk by chunk (server-sent events arrive as they are sent).

Usage: python bearer_proxy.py LISTEN_PORT UPSTREAM_HOST:PORT TOKEN
"""

import http.client
import http.server
import sys

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "authorization",
       "proxy-connection", "te", "upgrade"}


def main():
    listen, upstream, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    host, port = upstream.rsplit(":", 1)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            headers["Authorization"] = f"Bearer {token}"
            conn = http.client.HTTPConnection(host, int(port), timeout=120)
            conn.request(self.command, self.path, body=body, headers=headers)
            r = conn.getresponse()
            self.send_response(r.status, r.reason)
            for k, v in r.getheaders():
                if k.lower() not in HOP:
                    self.send_header(k, v)
            if r.status in (204, 304) or self.command == "HEAD":
                self.send_header("Content-Length", "0")
                self.end_headers()
                conn.close()
                return
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                while True:
                    chunk = r.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (OSError, http.client.HTTPException):
                # Either side went away mid-answer (a stream the server ended, a client
                # that left): end this connection as the upstream ended its answer.
                self.close_connection = True
            finally:
                conn.close()

        do_GET = do_POST = do_DELETE = do_PUT = do_HEAD = do_OPTIONS = forward

        def handle(self):
            # A client that closes its connection is no error of the proxy's.
            try:
                super().handle()
            except (OSError, http.client.HTTPException):
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen), Handler)
    server.daemon_threads = True
    print("ready", flush=True)
    server.serve_forever()


main()
