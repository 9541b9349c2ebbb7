"""One local HTTP server for the download tests: fixture bytes served from 127.0.0.1 (the real
urllib / fileio code paths run against it through $MLPERF_DOWNLOAD_MIRROR or a patched URL)."""
from __future__ import annotations

import hashlib
import http.server
import threading
import time
import urllib.parse


class Server:
    """routes: "/<host>/<path>" -> bytes; redirects: path -> Location (answered 302); modes: path ->
    "truncate" | "404" | "stall" (for one request). Honours Range requests (recorded in ``ranges``);
    every path asked for is recorded in ``hits``."""

    def __init__(self):
        self.routes: dict[str, bytes] = {}
        self.redirects: dict[str, str] = {}
        self.modes: dict[str, str] = {}
        self.ranges: list[str] = []
        self.hits: list[str] = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                return None

            def do_GET(self):
                raw = self.path.split("?")[0]
                path = urllib.parse.unquote(raw)
                outer.hits.append(raw)
                if path in outer.redirects:
                    self.send_response(302)
                    self.send_header("Location", outer.redirects[path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                mode = outer.modes.pop(path, None)
                body = outer.routes.get(path)
                if mode == "404" or body is None:
                    self.send_error(404)
                    return
                if mode == "stall":
                    time.sleep(3)
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    outer.ranges.append(rng)
                    start = int(rng.split("=")[1].split("-")[0])
                    self.send_response(206)
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                self.wfile.write(part[: len(part) // 2] if mode == "truncate" else part)
                if mode == "truncate":
                    self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def add_r2(self, uri_url: str, base_url: str, files: dict[str, bytes], md5: dict[str, str] | None = None) -> None:
        """Publish an MLCommons R2 dataset: the .uri, its .md5 list (md5 of the bytes unless overridden), the files."""
        uri = uri_url.split("://", 1)[1]
        self.routes["/" + uri] = (base_url + "\n").encode()
        lines = "".join(f"{(md5 or {}).get(p) or hashlib.md5(b).hexdigest()}  ./{p}\n" for p, b in files.items())
        self.routes["/" + uri[: -len(".uri")] + ".md5"] = lines.encode()
        for p, b in files.items():
            self.routes["/" + base_url.split("://", 1)[1].rstrip("/") + "/" + p] = b

    def close(self):
        self.httpd.shutdown()
