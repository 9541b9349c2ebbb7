"""Power (code.common.power), with injected sources (no GPU, no RAPL and no power meter here):

- informative power: NVML and RAPL sources read through a fake NVML module and a fake powercap tree (its counter
  wraps), summed over LoadGen's power window; one real tiny ResNet50 run samples a powercap tree that a thread
  of this test advances at a known rate, and its metadata.json, the result table and `make report` show it;
- power settings through a fake NVML: set, restored after the run, after an exception, Ctrl-C and SIGTERM, and
  refused in one line without permission;
- submittable power: the client runs a tiny ResNet50 SingleStream run twice (ranging, testing) against the
  stand-in power server on 127.0.0.1 (a replayed trace); the official power-dev checker bundled with the
  submission checker judges the logs (every check but the two that require power-dev's own released sources
  passes), the staged, exported v6.1 tree goes through the official submission checker (its power check and the
  nameplate-power sum), and our pre-flight refuses the stand-in's logs and an unfilled nameplate stub.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import official_env, official_root, run_main
from code.common.errors import HarnessError
from code.common.power import limits, nameplate, ptd, sampler, sources, standin

TRACE = [(310.5, 229.8, 1.42, 0.95), (318.2, 229.7, 1.46, 0.95), (305.9, 229.9, 1.40, 0.95)]
RAPL_W = 40.0                      # the rate the fake RAPL counter advances at during the harness runs
RAPL_MAX_UJ = 60_000_000           # small, so that the counter wraps during a run (every 1.5 s at 40 W)
SUBMITTER, SYSTEM = "OpenHarness", "PowerBox"


# --- fakes ---------------------------------------------------------------------------------------------------

class FakeNVML:
    """The part of pynvml the power code calls. Energy grows at ``watts`` per device with the fake clock."""

    class NVMLError(Exception):
        def __init__(self, value: int):
            super().__init__(f"NVML error {value}")
            self.value = value

    class NVMLError_NoPermission(NVMLError):
        def __init__(self):
            super().__init__(4)

    def __init__(self, n=2, watts=(250.0, 150.0), counter=True, allowed=True, clock=None):
        self.n, self.watts, self.counter, self.allowed = n, watts, counter, allowed
        self.clock = clock or time.monotonic
        self.limit_mw = [700_000] * n
        self.clocks: list = [None] * n
        self.mem_clocks: list = [None] * n
        self.calls: list[str] = []

    def nvmlInit(self): pass
    def nvmlDeviceGetCount(self): return self.n
    def nvmlDeviceGetHandleByIndex(self, i): return i
    def nvmlDeviceGetName(self, h): return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        if not self.counter:
            raise self.NVMLError(3)               # NOT_SUPPORTED: pre-Volta
        return self.watts[h] * self.clock() * 1e3  # mJ

    def nvmlDeviceGetPowerUsage(self, h): return int(self.watts[h] * 1e3)
    def nvmlDeviceGetPowerManagementLimit(self, h): return self.limit_mw[h]

    def _need(self):
        if not self.allowed:
            raise self.NVMLError_NoPermission()

    def nvmlDeviceSetPowerManagementLimit(self, h, mw):
        self.calls.append(f"limit {h} {mw}")
        self._need()
        self.limit_mw[h] = mw

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        self._need()
        self.clocks[h] = (lo, hi)

    def nvmlDeviceResetGpuLockedClocks(self, h): self.clocks[h] = None

    def nvmlDeviceSetMemoryLockedClocks(self, h, lo, hi):
        self._need()
        self.mem_clocks[h] = (lo, hi)

    def nvmlDeviceResetMemoryLockedClocks(self, h): self.mem_clocks[h] = None


def powercap_tree(root: Path, energy_uj: int = 0, max_uj: int = RAPL_MAX_UJ) -> Path:
    """intel-rapl:0 (package-0) with a sub-zone (intel-rapl:0:0, core), as the kernel lays it out."""
    for zone, name in (("intel-rapl:0", "package-0"), ("intel-rapl:0/intel-rapl:0:0", "core")):
        z = root / zone
        z.mkdir(parents=True, exist_ok=True)
        (z / "name").write_text(name + "\n")
        (z / "energy_uj").write_text(f"{energy_uj}\n")
        (z / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (root / "intel-rapl:0:0").symlink_to(root / "intel-rapl:0" / "intel-rapl:0:0")   # sysfs lists it flat too
    return root


class Clock:
    def __init__(self, t=1000.0): self.t = t
    def __call__(self): return self.t


# --- informative power: sources and the summary --------------------------------------------------------------

def test_rapl_counter_wraps_and_only_packages_count(tmp_path):
    root = powercap_tree(tmp_path / "powercap", energy_uj=RAPL_MAX_UJ - 1_000_000)
    zones, why = sources.rapl_zones(root)
    assert why is None and [z.name for z in zones] == ["intel-rapl:0"]        # the sub-zone is inside the package
    src = sources.CpuRapl(zones)
    assert src.describe == "RAPL: package-0"
    (root / "intel-rapl:0" / "energy_uj").write_text("2000000\n")             # wrapped past max_energy_range_uj
    assert src.read() == pytest.approx(3.000001)       # 1 J to the top, +1 uJ for the wrap to 0, then 2 J
    (root / "intel-rapl:0" / "energy_uj").write_text("2500000\n")
    assert src.read() == pytest.approx(3.500001)


def test_unreadable_or_absent_sources_say_so_in_one_line(tmp_path, monkeypatch):
    root = powercap_tree(tmp_path / "powercap")
    locked = root / "intel-rapl:0" / "energy_uj"
    real = Path.read_text

    def read_text(self, *a, **kw):       # the kernel's 0400 energy_uj (root reads any file, so it is simulated)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)
    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setenv("MLPERF_NO_NVML", "1")
    found, why = sources.detect(powercap_root=root)
    assert found == [] and "\n" not in why and why.startswith("no informative power on this machine: ")
    assert "readable by root only" in why and "MLPERF_NO_NVML" in why
    monkeypatch.setenv("MLPERF_POWERCAP_ROOT", str(tmp_path / "none"))
    lines = []
    s = sampler.for_run(lines.append)
    assert len(lines) == 1 and "no RAPL zones" in lines[0]
    assert sampler.record(s, tmp_path, 10) == {"available": False, "reason": lines[0][len("[power] "):]}


def test_nvml_sources_and_the_window_summary(tmp_path):
    clock = Clock()
    nv = FakeNVML(n=3, clock=clock, watts=(250.0, 150.0, 100.0))
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,2"
    try:
        gpu, why = sources.nvml_gpus(nv)
    finally:
        del os.environ["CUDA_VISIBLE_DEVICES"]
    assert why is None and gpu.handles == [0, 2] and gpu.describe == "NVML: 2 GPU(s) (NVIDIA H100 80GB HBM3)"
    # without the energy counter (pre-Volta): the power readings integrated, same watts
    nv2 = FakeNVML(n=1, clock=clock, counter=False, watts=(200.0,))
    gpu2 = sources.GpuNvml(nv2, [0], ["old"], clock=clock)
    gpu2.name = "gpu_old"
    s = sampler.Sampler([gpu, gpu2], clock=clock)
    for _ in range(11):                  # 10 s of readings, one a second
        s._read()
        clock.t += 1.0
    # LoadGen's window: 2.5 s .. 7.5 s after the first reading
    t0 = 1000.0
    detail = tmp_path / "mlperf_log_detail.txt"
    import datetime as dt

    def st(t):
        return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%m-%d-%Y %H:%M:%S.%f")
    detail.write_text(f':::MLLOG {{"key": "power_begin", "value": "{st(t0 + 2.5)}", "time_ms": 1}}\n'
                      f':::MLLOG {{"key": "power_end", "value": "{st(t0 + 7.5)}", "time_ms": 2}}\n')
    w = sampler.loadgen_window(tmp_path)
    assert w == pytest.approx((t0 + 2.5, t0 + 7.5))
    rec = sampler.summarize(s, w, samples=100)
    assert rec["window_s"] == pytest.approx(5.0)
    assert rec["avg_watts"] == {"gpu": pytest.approx(350.0), "gpu_old": pytest.approx(200.0),
                                "total": pytest.approx(550.0)}
    assert rec["energy_j"]["total"] == pytest.approx(2750.0)
    assert rec["energy_per_sample_j"]["total"] == pytest.approx(27.5)
    assert rec["trace"]["gpu_w"] and all(v == pytest.approx(350.0) for v in rec["trace"]["gpu_w"])
    assert sampler.text(rec) == "550.0 W (gpu 350.0, gpu_old 200.0), 27.5 J/sample"


# --- power settings --------------------------------------------------------------------------------------------

def test_power_settings_set_and_restored(capsys):
    nv = FakeNVML()
    with limits.applied({"power_limit": 300.0, "gpu_clock_lock": 1500, "memory_clock_lock": 0}, nvml=nv) as got:
        assert got == {"power_limit": 300.0, "gpu_clock_lock": 1500}
        assert nv.limit_mw == [300_000, 300_000] and nv.clocks == [(1500, 1500)] * 2
    assert nv.limit_mw == [700_000, 700_000] and nv.clocks == [None, None]
    for exc in (RuntimeError("boom"), KeyboardInterrupt()):      # a failing run, Ctrl-C
        with pytest.raises(type(exc)):
            with limits.applied({"power_limit": 250.0, "memory_clock_lock": 2619}, nvml=nv):
                assert nv.mem_clocks == [(2619, 2619)] * 2
                raise exc
        assert nv.limit_mw == [700_000, 700_000] and nv.mem_clocks == [None, None]
    # SIGTERM while the settings are held (a process that left SIGTERM at its default): SystemExit(143),
    # restored, and the default handler is back
    outer = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(SystemExit) as e:
            with limits.applied({"power_limit": 200.0}, nvml=nv):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
        assert e.value.code == 128 + signal.SIGTERM and nv.limit_mw == [700_000, 700_000]
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, outer)
    with limits.applied({"power_limit": 0}, nvml=None) as got:   # nothing asked: NVML is never touched
        assert got == {}


def test_power_settings_refused_without_permission():
    nv = FakeNVML(allowed=False)
    with pytest.raises(HarnessError) as e:
        with limits.applied({"power_limit": 300.0}, nvml=nv):
            raise AssertionError("the run must not start")
    assert "needs root (NVML: no permission)" in e.value.cause and "\n" not in e.value.render().split("\n  fix")[0]
    assert "sudo" in e.value.fix and nv.limit_mw == [700_000, 700_000]


def test_power_settings_are_config_keys():
    from code.common.benchmarks import registry

    fields = {f.name: f for f in registry()}
    assert fields["power_limit"].unit == "W" and fields["power_limit"].coerce("275") == 275.0
    with pytest.raises(ValueError):
        fields["gpu_clock_lock"].coerce("-5")


# --- nameplate power --------------------------------------------------------------------------------------------

def test_nameplate_rounds_and_sum_match_the_checker():
    consts = official_root("tools", "submission", "submission_checker", "constants.py").read_text()
    block = re.search(r"NAMEPLATE_POWER_PATH = \{(.*?)\n\}", consts, re.S).group(1)
    assert tuple(re.findall(r'"(v[\d.]+)"', block)) == nameplate.ROUNDS
    assert '"{division}/{submitter}/systems/{system}_power.yaml"' in block
    stub = yaml.safe_load(nameplate.stub("S1"))
    found, _ = nameplate.problems(stub)
    assert len(found) == 4 and all("still says 'TO FILL" in w for w in found)


def test_add_system_writes_the_nameplate_stub(tmp_path, monkeypatch):
    import shutil

    from code.common.add_system import add_system
    from conftest import REPO

    for d in ("configs", "systems"):
        shutil.copytree(REPO / d, tmp_path / d)
    monkeypatch.setenv("MLPERF_CONFIGS_DIR", str(tmp_path / "configs"))
    monkeypatch.setenv("MLPERF_SYSTEMS_DIR", str(tmp_path / "systems"))
    monkeypatch.setenv("MLPERF_FAKE_SYSTEM", json.dumps({"gpus": [{"name": "NVIDIA H100 80GB HBM3",
                                                                   "pci_id": "0x233010DE", "memory_mb": 81559}] * 2}))
    said = []
    assert add_system({"system_id": "PowerBox-H100", "based_on": "H100-SXM-80GB"}, log=said.append) == 0
    stub = tmp_path / "systems" / "PowerBox-H100x2_TRT_power.yaml"
    assert stub.is_file() and any(str(stub) in line for line in said)
    data = yaml.safe_load(stub.read_text())
    assert list(data) == ["PowerBox-H100x2_TRT"] and len(nameplate.problems(data)[0]) == 4
    stub.write_text(stub.read_text().replace("TO FILL: the server model", "edited"))
    add_system({"system_id": "PowerBox-H100", "based_on": "H100-SXM-80GB"}, log=said.append)
    assert "edited" in stub.read_text()           # a filled-in file is never written over


# --- submittable power: one tiny ResNet50 SingleStream run, ranging + testing, against the stand-in -----------

@pytest.fixture(scope="module")
def power_run(tiny_resnet, tmp_path_factory):
    """`make run_power_harness` against the stand-in: the client wraps the harness (two LoadGen runs, ranging and
    testing); a thread advances a fake RAPL counter at RAPL_W, which the harness child samples."""
    tmp = tmp_path_factory.mktemp("power")
    cap = powercap_tree(tmp / "powercap")
    stop = threading.Event()

    def advance():                       # the counter a 40 W package would show, wrapping at RAPL_MAX_UJ
        t0 = time.time()
        while not stop.wait(0.02):
            e = int((time.time() - t0) * RAPL_W * 1e6) % (RAPL_MAX_UJ + 1)
            (cap / "energy_uj.tmp").write_text(f"{e}\n")             # whole, as sysfs shows it
            os.replace(cap / "energy_uj.tmp", cap / "intel-rapl:0" / "energy_uj")
    env = {**tiny_resnet, "MLPERF_POWERCAP_ROOT": str(cap), "MLPERF_NO_NVML": "1", "MLPERF_BUILD_DIR": str(tmp / "build")}
    th = threading.Thread(target=advance, daemon=True)
    th.start()
    try:
        with standin.StandIn(TRACE, tmp / "server") as srv:
            t0 = time.time()
            r = run_main("--action=run_power_harness", f"--power_server=127.0.0.1:{srv.port}", "--benchmarks=resnet50",
                         "--model_variant=tiny", "--scenarios=SingleStream", "--min_duration=1200",
                         "--min_query_count=64", env=env)     # 64: VALID (p90 early stopping) on a loaded machine
            wall = time.time() - t0
    finally:
        stop.set()
    assert r.returncode == 0, r.stdout + r.stderr
    said = r.stdout.splitlines()
    [out] = (tmp / "build" / "power_results").glob("*/resnet50/SingleStream/default/performance")
    [logs] = (tmp / "build" / "logs" / "power").glob("*")
    metas = [json.loads(p.read_text()) for p in sorted(logs.rglob("metadata.json"))]
    print(f"power run (ranging + testing, two harness runs): {wall:.1f} s")
    return {"out": out, "logs": logs, "metas": metas, "said": said, "env": tiny_resnet, "tmp": tmp, "wall": wall}


@pytest.mark.parametrize("args,cause", [
    ((), "error: --action=run_power_harness needs --power_server"),
    (("--power_server=127.0.0.1:1",), "error: cannot reach the power server at 127.0.0.1:1"),
    (("--power_server=127.0.0.1:x",), "error: --power_server=127.0.0.1:x: the port must be a number"),
    (("--power_server=127.0.0.1", "--test_mode=AccuracyOnly"), "error: a power run is a PerformanceOnly run")])
def test_power_run_bad_input_is_one_line(power_run, tmp_path, args, cause):
    r = run_main("--action=run_power_harness", "--benchmarks=resnet50", "--model_variant=tiny",
                 "--scenarios=SingleStream", *args, env={**power_run["env"], "MLPERF_BUILD_DIR": str(tmp_path / "b")})
    assert r.returncode != 0 and r.stderr.startswith(cause) and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert not list((tmp_path / "b").rglob("metadata.json"))


def test_power_logs_laid_out_as_the_checker_reads_them(power_run):
    out = power_run["out"]
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["power/client.json", "power/client.log", "power/ptd_logs.txt", "power/server.json",
                     "power/server.log", "ranging/mlperf_log_detail.txt", "ranging/mlperf_log_summary.txt",
                     "ranging/spl.txt", "run_1/mlperf_log_detail.txt", "run_1/mlperf_log_summary.txt", "run_1/spl.txt"]
    roles = sorted((m["power_run"]["role"], m["power_run"]["performance_dir"]) for m in power_run["metas"])
    assert roles == [("ranging", str(out)), ("testing", str(out))]
    # the run_1 logs are the testing run's own, byte for byte
    testing = next(Path(m["log_dir"]) for m in power_run["metas"] if m["power_run"]["role"] == "testing")
    assert (testing / "mlperf_log_detail.txt").read_bytes() == (out / "run_1" / "mlperf_log_detail.txt").read_bytes()


def test_attach_finds_the_runs_of_a_power_result(power_run, tmp_path):
    """A result of power-dev's own client (same layout) is tied to its harness runs by its client.json hashes."""
    import shutil

    from code.common.power import result

    logs = tmp_path / "logs"
    shutil.copytree(power_run["logs"], logs)
    for meta in logs.rglob("metadata.json"):
        m = json.loads(meta.read_text())
        m.pop("power_run")
        meta.write_text(json.dumps(m))
    found = result.attach(power_run["out"], logs, log=lambda _: None)
    marks = {r: json.loads((d / "metadata.json").read_text())["power_run"] for r, d in found.items()}
    assert {r: m["role"] for r, m in marks.items()} == {"ranging": "ranging", "testing": "testing"}
    assert {m["performance_dir"] for m in marks.values()} == {str(power_run["out"])}
    with pytest.raises(HarnessError, match="has the ranging and testing log"):
        result.attach(power_run["out"], tmp_path / "empty", log=lambda _: None)


def test_official_power_checker_judges_the_session(power_run):
    """The checker power-dev ships with the submission checker, run as a script on the result folder."""
    pc = official_root("tools", "submission", "submission_checker", "checks", "power", "power_checker.py")
    r = subprocess.run([sys.executable, str(pc), str(power_run["out"])], cwd=power_run["tmp"], env=official_env(),
                       capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    passed = {ln.split("[x] ", 1)[1].strip() for ln in text.splitlines() if "[x] " in ln}
    failed = {ln.split("[ ] ", 1)[1].strip() for ln in text.splitlines() if "[ ] " in ln}
    # our client and the stand-in are not power-dev's released sources: exactly those two checks refuse them
    assert failed == {"Check client sources checksum", "Check server sources checksum"}, text[-3000:]
    assert passed == {"Check PTD commands and replies", "Check UUID", "Check session name", "Check time difference",
                      "Check client server messages", "Check results checksum",
                      "Check errors and warnings from PTD logs", "Check PTD configuration",
                      "Check debug is disabled on server-side"}, text[-3000:]
    assert "WARNING" not in text, text[-3000:]


def test_informative_power_in_record_table_and_report(power_run, tmp_path):
    from code.common.results import records

    for m in power_run["metas"]:
        p = m["power"]
        assert p["available"] and p["sources"] == {"cpu": "RAPL: package-0"}, p
        assert p["window"] == "loadgen power_begin..power_end" and p["window_s"] >= 1.2
        # the counter wrapped at least once in the window; the summary still sees the thread's rate
        assert p["avg_watts"]["cpu"] == pytest.approx(RAPL_W, rel=0.1), p["avg_watts"]
        eps = p["energy_per_sample_j"]["total"]
        assert eps == pytest.approx(p["energy_j"]["total"] / m["completed_samples"], rel=1e-3)
        assert len(p["trace"]["t_s"]) == len(p["trace"]["cpu_w"]) > 5
    table = records.table(power_run["metas"])
    assert "power (informative)" in table.splitlines()[0] and "W (cpu " in table and "J/sample" in table
    r = run_main("--action=report", f"--report_logs={power_run['logs']}", f"--report_dir={tmp_path / 'rep'}",
                 env=power_run["env"], check=True)
    html = (tmp_path / "rep" / "index.html").read_text()
    assert html.count('<p class="meta">Informative power over ') == 2 and html.count("-power.png") == 2, r.stdout
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert all(row["power"]["available"] for row in summary["runs"])


def test_power_limit_reaches_nvml_from_the_command_line(power_run, tmp_path):
    """A run asking for a power limit where NVML finds no GPU (this machine) stops before LoadGen, in one line."""
    if sources.nvml_gpus()[0] is not None:
        pytest.skip("NVML finds a GPU here: a test never changes a real GPU's power limit")
    r = run_main("--action=run_harness", "--benchmarks=resnet50", "--model_variant=tiny", "--scenarios=SingleStream",
                 "--min_duration=100", "--min_query_count=1", "--power_limit=300", f"--log_dir={tmp_path / 'logs'}",
                 env=power_run["env"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.stderr.startswith("error: power_limit set, but NVML finds no NVIDIA GPU here"), r.stderr
    assert not list((tmp_path / "logs").rglob("metadata.json"))


def test_staged_power_result_through_the_official_checker(power_run, tmp_path):
    """update_results takes the testing run with its power logs (never the ranging run), export lays them out
    for v6.1, the official checker runs its power check on them, and our pre-flight names what is not
    submittable: the stand-in's logs and the unfilled nameplate stub."""
    from code.common.submission.check import check

    env = {**power_run["env"], "MLPERF_STAGING_ROOT": str(tmp_path / "stage")}
    sysdir = tmp_path / "stage" / "systems"
    run_main("--action=update_results", "--round=v6.1", f"--stage_logs={power_run['logs']}", f"--submitter={SUBMITTER}",
             env=env, check=True)
    perf = next((tmp_path / "stage" / "results").glob("*/resnet/SingleStream/performance"))
    system = perf.parents[2].name
    assert sorted(p.name for p in perf.iterdir()) == ["power", "ranging", "run_1"]
    nameplate.write_stub(sysdir, system, force=False, log=lambda _: None)
    run_main("--action=export_submission", "--round=v6.1", f"--submitter={SUBMITTER}",
             f"--submission_dir={tmp_path / 'sub'}", "--tarball=false", env=env, check=True)
    tree = tmp_path / "sub" / "closed" / SUBMITTER
    f = check(tmp_path / "sub", submitter=SUBMITTER, version="v6.1")
    ours = [ln for ln in f.lines() if "power" in ln.lower()]
    assert any("server.json: made by the stand-in power server" in ln for ln in ours), ours
    assert sum("still says 'TO FILL" in ln for ln in ours) == 4, ours
    # filled in: our pre-flight is content, and the official checker sums it as design power
    filled = {system: [{"Rack 1": [{"Server 1": [{"Description": "2U server", "Min PSUs Needed": 1,
                                                  "PSUs": [{"Name": "PSU 1", "PowerCapacityWatts": 1600},
                                                           {"Name": "PSU 2", "PowerCapacityWatts": 1200}]}]}]}]}
    (tree / "systems" / f"{system}_power.yaml").write_text(yaml.safe_dump(filled))
    f = check(tmp_path / "sub", submitter=SUBMITTER, version="v6.1")
    assert not [ln for ln in f.lines() if "_power.yaml" in ln], f.lines()
    kept = (tree / "systems" / f"{system}_power.yaml").read_text()
    (tree / "systems" / f"{system}_power.yaml").unlink()
    f = check(tmp_path / "sub", submitter=SUBMITTER, version="v6.1")
    assert [ln for ln in f.lines() if "_power.yaml: missing: a power result needs" in ln], f.lines()
    (tree / "systems" / f"{system}_power.yaml").write_text(kept)
    # the official checker's power check (PowerCheck: file lists, power-dev's script, the power metric from
    # spl.txt in LoadGen's window) and its nameplate sum, on the exported tree; a driver imports them (the whole
    # checker stops earlier, at this tree's missing accuracy run)
    tools = official_root("tools", "submission")
    driver = tmp_path / "power_checks.py"
    driver.write_text(DRIVER)
    r = subprocess.run([sys.executable, str(driver), str(tmp_path / "sub"), SUBMITTER], cwd=tools, env=official_env(),
                       capture_output=True, text=True, timeout=120)
    text = r.stdout + r.stderr
    res = json.loads(text.split("RESULT ", 1)[1].splitlines()[0])
    assert res["required_files"] and res["power_metric_ok"] and res["nameplate"], text[-4000:]
    assert res["design_power_watts"] == 1600, res          # PSU 1 of the 1 needed: the largest
    assert "ERROR:main:[ ] Check client sources checksum" in text and res["external"] is False, text[-4000:]
    # the checker's power metric for SingleStream: mJ per query = average watts x window x 1000 / queries
    run_1 = perf / "run_1"
    begin, end = sampler.detail_window(run_1 / "mlperf_log_detail.txt")
    watts = [float(ln.split(",")[3]) for ln in (run_1 / "spl.txt").read_text().splitlines()
             if begin < sampler.stamp_seconds(ln.split(",")[1]) < end]
    queries = int(re.search(r'"key": "result_query_count", "value": (\d+)',
                            (run_1 / "mlperf_log_detail.txt").read_text()).group(1))
    assert watts and set(watts) <= {w for w, _, _, _ in TRACE}
    assert res["power_metric"] == pytest.approx(sum(watts) / len(watts) * (end - begin) * 1000 / queries, rel=1e-3)
    assert "has no power samples" not in text and "file list mismatch" not in text, text[-4000:]


DRIVER = """
import json, logging, os, sys
sys.path.insert(0, os.getcwd())          # tools/submission: the checker package
logging.basicConfig(level=logging.INFO)
from submission_checker.configuration.configuration import Config
from submission_checker.loader import Loader
from submission_checker.checks.power_check import PowerCheck
from submission_checker.checks.system_check import SystemCheck

log = logging.getLogger("main")
config = Config("v6.1", None, submitter=sys.argv[2])
for logs in Loader(sys.argv[1], "v6.1", config).load():
    pc = PowerCheck(log, logs.loader_data["power_dir_path"], config, logs)
    out = {"has_power": pc.has_power, "required_files": pc.required_files_check(),
           "external": pc.external_power_check(), "power_metric_ok": pc.get_power_metric_check(),
           "power_metric": logs.loader_data.get("power_metric"),
           "nameplate": SystemCheck(log, logs.loader_data["system_path"], config, logs).nameplate_power_check(),
           "design_power_watts": logs.loader_data.get("design_power_watts")}
    print("RESULT " + json.dumps(out), flush=True)
"""
