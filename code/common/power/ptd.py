"""Client side of the MLCommons power protocol (mlcommons/power-dev ptd_client_server, protocol v3, as of the
code-freeze commit c4b3ad8202fbd8ac28d77149e5e7aeadb725bbf2 that mlcommons/inference's README names for the
current rounds). Written from the protocol, not from power-dev's code.

Wire format: one UTF-8 line per message ending in CRLF; each command gets one reply line. A file is sent as
chunks: a line with the chunk's length, the bytes, and a line "0" at the end. The session, as the server
expects it:

    client: mlcommons/power client v3         server: mlcommons/power server v3
    time                                      <server's POSIX time>   (clock check; the client exits past 0.5 s)
    new,<label>,<client uuid>                 OK <session>,<server uuid>
    session,<session>,start,ranging           OK      (PTDaemon: auto ranges, Go,1000,0,<session>_ranging)
        ... the workload runs (LoadGen's power_begin..power_end must fall inside) ...
    session,<session>,stop,ranging            OK      (the server derives the testing ranges from it)
    session,<session>,start,testing / stop,testing    the same, with fixed ranges: the result
    session,<session>,done                    OK      (the server writes server.json)
    download,<session>,<file>                 <file as chunks>
    cleanup,<session>                         OK

The result folder (``output``) is laid out as the submission checker reads a power result (the ``performance``
folder of results/<system>/<benchmark>/<scenario>): ranging/ and run_1/ hold LoadGen's detail and summary logs
and the server's spl.txt; power/ holds client.json, client.log, server.json, server.log and ptd_logs.txt.
The server's run_1/ptd_out.txt is not fetched: the checker's file list for run_1/ has no room for it.

client.json records the SHA-1 of this package's sources, as power-dev's client records its own: the official
checker's "sources checksum" check accepts only power-dev's released client, so a submission's power runs must
be made with that client (this one is for rehearsals and for the harness's own tests).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Callable

from code.common.errors import HarnessError
from code.common.power.result import mark_run
from code.common.power.sampler import detail_window

PROTO_VERSION = "3"
MAGIC_CLIENT = f"mlcommons/power client v{PROTO_VERSION}"
MAGIC_SERVER = f"mlcommons/power server v{PROTO_VERSION}"
DEFAULT_PORT = 4950
POWER_DEV_COMMIT = "c4b3ad8202fbd8ac28d77149e5e7aeadb725bbf2"
SERVER_FILES = ("power/ptd_logs.txt", "ranging/spl.txt", "power/server.json", "power/server.log", "run_1/spl.txt")
LOADGEN_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
MAX_CLOCK_DRIFT_S = 0.5


class Wire:
    """One end of a connection: CRLF-terminated lines and length-prefixed file chunks."""

    def __init__(self, sock: socket.socket):
        self.sock, self._buf = sock, b""

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def recv(self) -> str | None:
        while b"\n" not in self._buf:
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line.rstrip(b"\r").decode(errors="replace")

    def command(self, line: str) -> str | None:
        self.send(line)
        return self.recv()

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            if self._buf:
                take, self._buf = self._buf[:n - len(out)], self._buf[n - len(out):]
                out += take
                continue
            data = self.sock.recv(min(1 << 16, n - len(out)))
            if not data:
                raise ConnectionError("the peer closed the connection in the middle of a file")
            out += data
        return out

    def send_file(self, path: Path) -> None:
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                self.send(str(len(chunk)))
                if not chunk:
                    return
                self.sock.sendall(chunk)

    def recv_file(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            while True:
                line = self.recv()
                if line is None:
                    raise ConnectionError(f"the server closed the connection while sending {path.name}")
                n = int(line)
                if n <= 0:
                    break
                f.write(self._exact(n))
        os.replace(tmp, path)


def hash_dir(root: Path) -> dict[str, str]:
    """SHA-1 of every file under ``root`` by '/'-joined relative path, sorted (the checker recomputes it)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[p.relative_to(root).as_posix()] = hashlib.sha1(p.read_bytes()).hexdigest()
    return dict(sorted(out.items()))


def own_sources() -> dict[str, str]:
    """SHA-1 of this package's Python files (client.json "sources")."""
    here = Path(__file__).parent
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in sorted(here.glob("*.py"))}


class Summary:
    """client.json / server.json: the session as each side saw it (same fields as power-dev's)."""

    def __init__(self, side: str):
        self.side = side
        self.messages: list[dict] = []
        self.phases: dict[str, list] = {"ranging": [], "testing": []}
        self.uuid = {"client": None, "server": None}
        self.session_name: str | None = None
        self.results: dict | None = None
        self.extra: dict = {}

    def message(self, cmd: str, t_cmd: float, reply: str | None, t_reply: float) -> None:
        self.messages.append({"cmd": cmd, "cmd_time": t_cmd, "reply": reply, "reply_time": t_reply})

    def phase(self, mode: str, n: int) -> None:
        pair = [time.time(), time.monotonic()]
        ph = self.phases[mode]
        if len(ph) == n:
            ph.append(pair)
        elif len(ph) > n:
            ph[n] = pair

    def to_json(self) -> dict:
        return {"version": "1.0", "timezone": -time.localtime().tm_gmtoff,
                "modules": {f"code.common.power.{Path(n).stem}": n for n in own_sources()},
                "sources": own_sources(), "messages": self.messages, "uuid": self.uuid,
                "session_name": self.session_name, "results": self.results, "phases": self.phases, **self.extra}

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=4), encoding="utf-8", newline="\n")


def find_loadgen_logs(root: Path, t0: float, t1: float) -> Path | None:
    """The folder under ``root`` whose detail log's power window lies inside the workload's run (t0, t1)."""
    for detail in sorted(root.rglob("mlperf_log_detail.txt")):
        w = detail_window(detail)
        if w and t0 < w[0] and w[1] < t1:
            return detail.parent
    return None


class Client:
    def __init__(self, addr: str, port: int = DEFAULT_PORT, log: Callable[[str], None] = print, timeout: float = 600):
        self.log_lines: list[str] = []
        self._print = log
        try:
            sock = socket.create_connection((addr, port), timeout=timeout)
        except OSError as e:
            raise HarnessError(f"cannot reach the power server at {addr}:{port} ({e.strerror or e})",
                               "start the power server (power-dev's server.py with PTDaemon) or fix --power_server "
                               "(make ... POWER_SERVER=host[:port])")
        self.wire = Wire(sock)
        self.summary = Summary("client")

    def log(self, line: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        self.log_lines.append(f"client {stamp} [INFO] {line}")
        self._print(f"[power] {line}")

    def command(self, cmd: str, expect_ok: bool = False) -> str:
        t = time.time()
        reply = self.wire.command(cmd)
        self.summary.message(cmd, t, reply, time.time())
        if reply is None:
            raise HarnessError(f"the power server closed the connection after {cmd.split(',')[0]!r}",
                               "see the power server's log, then run again")
        if expect_ok and reply != "OK":
            raise HarnessError(f"the power server answered {reply!r} to {cmd!r}", "see the power server's log")
        return reply

    def clock_check(self) -> None:
        t0 = time.time()
        remote = float(self.command("time"))
        drift = remote - (t0 + time.time()) / 2
        if abs(drift) > MAX_CLOCK_DRIFT_S:
            raise HarnessError(f"this machine's clock and the power server's differ by {drift:+.2f} s",
                               "sync both with the same NTP server (chronyc makestep), then run again")

    def close(self) -> None:
        try:
            self.wire.sock.close()
        except OSError:
            pass


def server_address(server: str) -> tuple[str, int]:
    """``--power_server`` (``POWER_SERVER=``) as (host, port): host or host:port, port DEFAULT_PORT by default."""
    host, _, port = server.rpartition(":") if ":" in server else (server, "", "")
    try:
        return host, int(port) if port else DEFAULT_PORT
    except ValueError:
        raise HarnessError(f"--power_server={server}: the port must be a number",
                           f"--power_server={host}:{DEFAULT_PORT}") from None


def connect(addr: str, port: int = DEFAULT_PORT, log: Callable[[str], None] = print, timeout: float = 600) -> Client:
    """A client past the greeting: the server is an MLCommons power server of this protocol, and the two clocks
    agree (power-dev's client checks the same before a session)."""
    c = Client(addr, port, log, timeout)
    try:
        magic = c.command(MAGIC_CLIENT)
        if magic != MAGIC_SERVER:
            raise HarnessError(f"{addr}:{port} is not an MLCommons power server v{PROTO_VERSION} (it said {magic!r})",
                               "start power-dev's server.py at the pinned commit " + POWER_DEV_COMMIT[:12])
        c.clock_check()
    except OSError as e:               # a timeout or a reset: something listens there, but no power server
        c.close()
        raise HarnessError(f"the power server at {addr}:{port} did not answer the greeting ({e})",
                           "start power-dev's server.py at the pinned commit " + POWER_DEV_COMMIT[:12]) from None
    except BaseException:
        c.close()
        raise
    return c


def check_server(server: str) -> tuple[str, int]:
    """Before any run (make run_power_harness, make submission POWER_SERVER=): the server named is reachable, speaks
    the protocol and agrees on the time; a HarnessError (one line, with the fix) otherwise. Returns (host, port)."""
    host, port = server_address(server)
    connect(host, port, log=lambda _: None, timeout=15).close()
    return host, port


def run(addr: str, workload: str | Callable[[], None], loadgen_logs: str | Path, output: str | Path, *,
        port: int = DEFAULT_PORT, label: str = "", log: Callable[[str], None] = print) -> Path:
    """A power run: the workload under the ranging mode, then again under the testing mode (the result).
    ``workload``: a shell command (as power-dev's ``--run-workload``) or a callable; each run must write LoadGen's
    logs somewhere under ``loadgen_logs``. Returns ``output``, laid out as described in the module docstring."""
    loadgen_logs, output = Path(loadgen_logs).resolve(), Path(output).resolve()
    if output == loadgen_logs or loadgen_logs in output.parents:
        raise HarnessError(f"the power output {output} lies inside the LoadGen log folder {loadgen_logs}",
                           "give the power run an output folder outside its LoadGen log folder")
    if not re.fullmatch(r"[-_A-Za-z0-9]*", label):
        raise HarnessError(f"power label {label!r} may hold letters, digits, '-' and '_' only", "choose another label")
    if output.exists() and any(output.iterdir()):
        raise HarnessError(f"{output} is not empty", f"remove it (rm -r {output}) or choose another output folder")
    c = connect(addr, port, log)
    s = c.summary
    try:
        client_uuid = uuid.uuid4()
        reply = c.command(f"new,{label},{client_uuid}")
        if not reply.startswith("OK "):
            raise HarnessError(f"the power server refused a new session ({reply!r})", "see the power server's log")
        session, server_uuid = reply[3:].split(",")
        s.session_name, s.uuid = session, {"client": str(client_uuid), "server": str(uuid.UUID(server_uuid))}
        c.log(f"session {session}")
        (output / "power").mkdir(parents=True, exist_ok=True)
        runs: dict[str, Path] = {}
        for mode, folder in (("ranging", "ranging"), ("testing", "run_1")):
            c.clock_check()
            s.phase(mode, 0)
            c.command(f"session,{session},start,{mode}", expect_ok=True)
            s.phase(mode, 1)
            c.clock_check()
            c.log(f"running the workload in {mode} mode")
            t0 = time.time()
            if callable(workload):
                workload()
            else:
                subprocess.run(workload, shell=True, check=True)
            t1 = time.time()
            c.clock_check()
            s.phase(mode, 2)
            c.command(f"session,{session},stop,{mode}", expect_ok=True)
            s.phase(mode, 3)
            c.clock_check()
            found = find_loadgen_logs(loadgen_logs, t0, t1)
            if found is None:
                raise HarnessError(f"no LoadGen log under {loadgen_logs} has its power window inside the {mode} run",
                                   "make the workload write its logs under the --loadgen_logs folder")
            (output / folder).mkdir()
            for name in LOADGEN_FILES:
                shutil.copy(found / name, output / folder / name)
            c.log(f"{mode}: LoadGen logs from {found}")
            runs[mode] = found
        c.log("done runs")
        (output / "power" / "client.log").write_text("\n".join(c.log_lines) + "\n", encoding="utf-8", newline="\n")
        s.results = hash_dir(output)
        s.save(output / "power" / "client.json")
        c.command(f"session,{session},done", expect_ok=True)
        for name in SERVER_FILES:
            c.wire.send(f"download,{session},{name}")
            c.wire.recv_file(output / name)
        c.command(f"cleanup,{session}", expect_ok=True)
        for mode, found in runs.items():           # harness runs: staging takes the testing run with its power logs
            mark_run(found, mode, session, output)
    except (ConnectionError, subprocess.CalledProcessError) as e:
        raise HarnessError(f"the power run stopped: {e}", "see the power server's log and the workload's output") from None
    finally:
        c.close()
    return output
