"""A stand-in for the MLCommons power server and the PTDaemon behind it, on 127.0.0.1, for tests and rehearsals.

It speaks the server side of the protocol ``code.common.power.ptd`` describes and answers as a single-channel
Yokogawa WT310E behind SPEC PTDaemon 1.11.1 would (the replies power-dev's server records and the checker reads),
but measures nothing: it replays a recorded power trace (``Watts,Volts,Amps,PF`` rows, e.g. the samples of an
spl.txt) one sample per second of the measurement, cyclically. Its server.json says ``"stand_in": true``; its
sources are its own, so the official checker's "server sources checksum" check refuses its logs, as it must.

    python -m code.common.power.standin --trace trace.csv [--port 4950] [--out build/power_standin]
"""
from __future__ import annotations

import datetime as dt
import shutil
import socketserver
import threading
import time
import uuid
from pathlib import Path

from code.common.power import ptd

IDENTIFY = "YokogawaWT310E,version=1.11.1-stand-in,replayed-trace"
INITIAL_RANGES = "Ranges,0,20,0,300"        # RR: amps auto off, 20 A; volts auto off, 300 V
GO_REPLY = "Starting untimed measurement, maximum 500000 samples at 1000ms with 0 rampup samples"
STOP_REPLY = "Stopping untimed measurement"
SETTLE_S = 0.05                             # power-dev's server waits 10 s for the analyzer before each Go
DEVICE_TYPE = 49                            # PTDaemon's number for the WT310/WT310E


def stamp(t: float) -> str:
    """PTDaemon's timestamp (UTC, milliseconds): 12-06-2026 21:04:05.123."""
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m-%d-%Y %H:%M:%S.%f")[:-3]


def read_trace(path: str | Path) -> list[tuple[float, float, float, float]]:
    """(watts, volts, amps, pf) rows from a CSV of those four columns, or from spl.txt lines."""
    rows = []
    for line in Path(path).read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if parts and parts[0] == "Time":        # spl.txt: Time,<t>,Watts,<w>,Volts,<v>,Amps,<a>,PF,<pf>,Mark,<m>
            rows.append(tuple(float(parts[i]) for i in (3, 5, 7, 9)))
        elif len(parts) >= 4:
            try:
                rows.append(tuple(float(x) for x in parts[:4]))
            except ValueError:                  # a header
                continue
    if not rows:
        raise ValueError(f"{path}: no Watts,Volts,Amps,PF rows")
    return rows


class _Session:
    def __init__(self, root: Path, label: str):
        self.id = time.strftime("%Y-%m-%d_%H-%M-%S") + (f"_{label}" if label else "")
        self.dir = root / self.id
        (self.dir / "power").mkdir(parents=True)
        self.ptd_log: list[str] = []
        self.go: float | None = None
        self.state = "initial"
        self.ranges = ("300", "20")


class StandIn:
    """``with StandIn(trace, out_dir) as s:`` serves on 127.0.0.1:s.port (0: any free port) in a thread."""

    def __init__(self, trace: list[tuple[float, float, float, float]], out_dir: str | Path, port: int = 0,
                 host: str = "127.0.0.1"):
        self.trace, self.out = trace, Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self._pos = 0
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                outer._serve(ptd.Wire(self.request))

        class Server(socketserver.TCPServer):
            allow_reuse_address = True

        self.server = Server((host, port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)

    def __enter__(self) -> "StandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- PTDaemon, replayed ----------------------------------------------------------------------------------
    def _ptd(self, cmd: str, reply: str) -> None:
        """One PTDaemon command and its reply, as server.json's ptd_messages records them."""
        self.ptd_messages.append({"cmd": cmd, "reply": reply})

    def _samples(self, s: _Session, mark: str, until: float) -> list[str]:
        lines, t = [], (s.go or until) + 1.0
        while t < until:
            w, v, a, pf = self.trace[self._pos % len(self.trace)]
            self._pos += 1
            lines.append(f"Time,{stamp(t)},Watts,{w:.6f},Volts,{v:.6f},Amps,{a:.6f},PF,{pf:.6f},Mark,{mark}")
            t += 1.0
        return lines

    def _start(self, s: _Session, mode: str) -> str:
        now = time.time()
        if mode == "ranging" and s.state == "initial":
            self.summary.phase("ranging", 0)
            s.ptd_log.append(f"{stamp(now)}: Uncertainty checking for YokogawaWT310E is activated")
            time.sleep(SETTLE_S)
            for cmd, reply in (("Hello", "Hello, PTDaemon here!"), ("Identify", IDENTIFY), ("RR", INITIAL_RANGES),
                               ("SR,V,Auto", "Range V changed"), ("SR,A,Auto", "Range A changed"),
                               ("SR,A,Auto", "Range A changed"), (f"Go,1000,0,{s.id}_ranging", GO_REPLY)):
                self._ptd(cmd, reply)
        elif mode == "testing" and s.state == "ranging_done":
            self.summary.phase("testing", 0)
            self._ptd(f"SR,V,{s.ranges[0]}", "Range V changed")
            self._ptd(f"SR,A,{s.ranges[1]}", "Range A changed")
            self._ptd(f"Go,1000,0,{s.id}_testing", GO_REPLY)
        else:
            return "Error"
        s.go = time.time()
        s.ptd_log.append(f"{stamp(s.go)}: Go with mark '{s.id}_{mode}'")
        s.state = mode
        self.summary.phase(mode, 1)
        return "OK"

    def _stop(self, s: _Session, mode: str) -> str:
        if s.state != mode:
            return "Error"
        self.summary.phase(mode, 2)
        now = time.time()
        folder = s.dir / ("run_1" if mode == "testing" else "ranging")
        folder.mkdir()
        lines = self._samples(s, f"{s.id}_{mode}", now)
        w = sum(float(x.split(",")[3]) for x in lines) / len(lines) if lines else 0.0
        if mode == "testing":
            self._ptd("Watts", f"Watts,{w:.6f}")
            self._ptd("Uncertainty", "Uncertainty,0.001")
        self._ptd("Stop", STOP_REPLY)
        self._ptd("RL", f"Last {len(lines)} samples")
        self._ptd("Uncertainty", "Uncertainty,0.001")
        self._ptd("Watts", f"Watts,{w:.6f}")
        (folder / "spl.txt").write_text("".join(x + "\n" for x in lines))
        s.ptd_log.append(f"{stamp(now)}: Completed test")
        if mode == "ranging":
            volts = max((float(x.split(",")[5]) for x in lines), default=230.0)
            amps = max((float(x.split(",")[7]) for x in lines), default=1.0)
            s.ranges = (f"{volts}", f"{amps * 1.1}")
            s.state = "ranging_done"
        else:
            (folder / "ptd_out.txt").write_text(f"Analyzer 1:\nPower: Watts,{w:.6f} \nUncertainty: Uncertainty,0.001\n")
            s.state = "testing_done"
        self.summary.phase(mode, 3)
        return "OK"

    def _done(self, s: _Session) -> None:
        self._ptd("SR,V,300", "Range V changed")          # back to the initial ranges (RR)
        self._ptd("SR,A,20", "Range A changed")
        (s.dir / "power" / "ptd_logs.txt").write_text("Analyzer 1\n" + "".join(x + "\n" for x in s.ptd_log))
        (s.dir / "power" / "server.log").write_text("\n".join(self.server_log) + "\n")
        self.summary.results = ptd.hash_dir(s.dir)
        self.summary.extra = {"ptd_messages": self.ptd_messages, "stand_in": True,
                              "ptd_config": [{"command": ["stand-in: replayed trace"], "device_type": DEVICE_TYPE,
                                              "interface_flag": "", "device_port": "replay", "channel": None}]}
        self.summary.save(s.dir / "power" / "server.json")

    # --- the power server -------------------------------------------------------------------------------------
    def _serve(self, wire: ptd.Wire) -> None:
        self.summary, self.ptd_messages, self.server_log = ptd.Summary("server"), [], []
        recording, session, last = True, None, None
        magic = wire.recv()
        self.summary.message(magic, time.time(), ptd.MAGIC_SERVER, time.time())
        wire.send(ptd.MAGIC_SERVER)
        if magic != ptd.MAGIC_CLIENT:
            return
        while True:
            line = wire.recv()
            if line is None:
                return
            t = time.time()
            self.server_log.append(f"server {stamp(t)} [INFO] Got command from the client {line!r}")
            cmd = line.split(",")
            reply: str | None = "Error"
            if cmd[0] == "time":
                reply = str(time.time())
            elif cmd[0] in ("set_ntp", "stop"):
                reply = "OK"
            elif cmd[0] == "new" and len(cmd) == 3:
                session = last = _Session(self.out, cmd[1])
                self.summary.uuid = {"client": cmd[2], "server": str(uuid.uuid4())}
                self.summary.session_name = session.id
                reply = f"OK {session.id},{self.summary.uuid['server']}"
            elif cmd[0] == "session" and session is not None and len(cmd) >= 4 and cmd[1] == session.id:
                reply = {"start": self._start, "stop": self._stop}[cmd[2]](session, cmd[3]) \
                    if cmd[2] in ("start", "stop") and cmd[3] in ("ranging", "testing") else "Error"
            elif cmd[0] == "session" and session is not None and cmd[2:] == ["done"]:
                self._done(session)
                session, recording, reply = None, False, "OK"
            elif cmd[0] == "download" and last is not None and cmd[1] == last.id and cmd[2] in ptd.SERVER_FILES + (
                    "run_1/ptd_out.txt",):
                wire.send_file(last.dir / cmd[2])
                continue
            elif cmd[0] == "cleanup" and last is not None and cmd[1] == last.id:
                shutil.rmtree(last.dir, ignore_errors=True)
                reply = "OK"
            if recording:
                self.summary.message(line, t, reply, time.time())
            wire.send(reply)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Stand-in MLCommons power server replaying a recorded trace.")
    p.add_argument("--trace", required=True)
    p.add_argument("--port", type=int, default=ptd.DEFAULT_PORT)
    p.add_argument("--out", default="build/power_standin")
    a = p.parse_args(argv)
    with StandIn(read_trace(a.trace), a.out, port=a.port) as s:
        print(f"[power] stand-in power server on 127.0.0.1:{s.port} (replaying {a.trace}); Ctrl-C stops it")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    raise SystemExit(main())
