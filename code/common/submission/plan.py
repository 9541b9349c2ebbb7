"""What ``make submission`` runs: the plan a round's table implies for one system type.

Every entry of the round (submission name: ``resnet``, ``bert-99.9``, ``llama3.1-8b-edge``) whose harness package
is registered and which the category requires gives, per required scenario (datacenter LLMs: plus the first of the
round's optional Interactive / Server the package runs), an accuracy run, a performance run and each audit of
``RoundBenchmark.compliance_tests``, in that order (an audit is verified against the key's two runs). Entries the
harness cannot file under their own name (v5.0's llama2-70b-interactive: staging files Interactive under
llama2-70b) are left out with a note. ``Item.argv`` is the ``python -m code.main`` command that makes one item.

With a power server (``make submission POWER_SERVER=host[:port]``) each performance run whose scenario may carry a
power result is a power item instead (kind "power"): ``make run_power_harness``'s ranging and testing runs under
that server, the testing run being the performance result, staged with power/ and ranging/ beside its run_1/.
"""
from __future__ import annotations

import dataclasses

from code.common import rounds
from code.common.errors import HarnessError

KINDS = ("accuracy", "performance", "power")          # then the audits, by test name
MODES = {"accuracy": "AccuracyOnly", "performance": "PerformanceOnly", "power": "PerformanceOnly"}
# Which performance results may carry power: the official checker's power rules (submission_checker: PowerCheck,
# POWER_DIR_PATH, POWER_UNIT_DICT) name no benchmark, category or division, only the scenarios whose power metric
# they define (Offline / Server / Interactive in W, SingleStream / MultiStream in mJ per query), for every round;
# power/ and ranging/ sit beside any results/<system>/<benchmark>/<scenario>/performance/run_1 of LoadGen's logs.
POWER_SCENARIOS = ("SingleStream", "MultiStream", "Offline", "Server", "Interactive")
# a smoke power run lasts at least this long: the power analyzer samples once a second, and the checker's power
# metric needs a sample inside LoadGen's window (an Offline smoke run is as long as its 64 samples take)
SMOKE_POWER_MS = 1500
# --smoke: each run as short as LoadGen allows for its scenario (tests/conftest.py sizes runs the same way): Offline
# by sample count, the others by 64 queries; never VALID for a submission, and marked --smoke in the run's record
SMOKE_QUERIES = 64
# (SingleStream's p90 early-stopping estimate needs 64 queries); the p99 scenarios the 662 their estimate needs, so
# that a smoke performance run can be VALID and its audits have a reference to be verified against
P99_QUERIES = 662
SMOKE_ARGS = {"Offline": ("--min_duration=1", f"--min_query_count={SMOKE_QUERIES}", "--offline_expected_qps=1"),
              **{s: ("--min_duration=100", f"--min_query_count={P99_QUERIES}")
                 for s in ("MultiStream", "Server", "Interactive")}}
SMOKE_OTHER = ("--min_duration=100", f"--min_query_count={SMOKE_QUERIES}")
# a smoke plan's Server / Interactive runs (and their audits) are scheduled at this share of the Offline smoke run
# the plan made just before on this machine, never at a config's fixed rate: tiny SDXL's 8 QPS completed 5.4/s here
# (INVALID, so its TEST01/TEST04 had no run to be verified against); a plan runs each entry's Offline items first
SMOKE_SERVER_SHARE = 0.4
RATE_SCENARIOS = ("Server", "Interactive")
# rough seconds per item, for the plan's first estimate (afterwards the ETA uses the items' measured times): a smoke
# item of the tiny variant; a full one: the round's min_duration plus loading, an accuracy pass over the whole set
SMOKE_S = {"vision": 20, "llm": 60}
LOAD_S = 120
ACCURACY_S = {"vision": 900, "llm": 3600}


@dataclasses.dataclass(frozen=True)
class Item:
    entry: str                 # submission name in the round ("resnet", "bert-99.9")
    package: str               # harness package that runs it ("resnet50")
    accuracy_target: str       # "" where the round has no split
    edge_twin: bool            # the "-edge" name of a package that has one (llama3.1-8b-edge)
    has_category: bool         # the package has a category setting (datacenter / edge twin)
    llm: bool
    scenario: str
    kind: str                  # "accuracy" | "performance" | "power" | "TEST01" ...
    power_server: str = ""     # kind "power": the power server (host[:port])

    @property
    def key(self) -> str:
        return f"{self.entry}/{self.scenario}/{self.kind}"

    @property
    def audit(self) -> bool:
        return self.kind not in KINDS

    def run_args(self, version: str, variant: str) -> list[str]:
        """The flags naming this item's benchmark, scenario, round and variant (for every command about it)."""
        a = [f"--benchmarks={self.package}", f"--scenarios={self.scenario}", f"--round={version}"]
        if self.accuracy_target:
            a.append(f"--accuracy_target={self.accuracy_target}")
        if self.has_category:
            a.append(f"--category={'edge' if self.edge_twin else 'datacenter'}")
        if variant != "reference":
            a.append(f"--model_variant={variant}")
        return a

    def argv(self, version: str, variant: str, smoke: bool, log_dir: str) -> list[str]:
        """``python -m code.main`` flags that make this item."""
        a = self.run_args(version, variant)
        if smoke:
            a += ["--smoke", *SMOKE_ARGS.get(self.scenario, SMOKE_OTHER)]
            if self.kind == "power":
                a = [x for x in a if not x.startswith("--min_duration=")] + [f"--min_duration={SMOKE_POWER_MS}"]
        if self.audit:
            return ["--action=run_audit_harness", f"--audit_test={self.kind}", *a]
        if self.kind == "power":        # its two runs under <log_dir>/power/<timestamp>/ (flow.record finds them)
            return ["--action=run_power_harness", f"--power_server={self.power_server}",
                    f"--log_dir={log_dir}/power", *a]
        return ["--action=run_harness", f"--test_mode={MODES[self.kind]}", f"--log_dir={log_dir}", "--overwrite", *a]

    def make_command(self, version: str, variant: str) -> str:
        """The make command a user runs to redo this item alone."""
        a = " ".join(x for x in self.run_args(version, variant) if not x.startswith("--round="))
        if self.audit:
            return f'make run_audit_{self.kind.lower()} ROUND={version} RUN_ARGS="{a}"'
        if self.kind == "power":
            return f'make run_power_harness POWER_SERVER={self.power_server} ROUND={version} RUN_ARGS="{a}"'
        return f'make run_harness ROUND={version} RUN_ARGS="{a} --test_mode={MODES[self.kind]}"'

    def estimate_s(self, rnd: rounds.Round, smoke: bool) -> float:
        family = "llm" if self.llm else "vision"
        runs = 2 if self.kind == "power" else 1        # a power item: the ranging run, then the testing run
        if smoke:
            return runs * SMOKE_S[family]
        if self.kind == "accuracy":
            return ACCURACY_S[family]
        return runs * (rnd.min_duration_ms / 1000 + LOAD_S)


def derive(version: str | None, system_type: str, benchmarks: tuple[str, ...] = (),
           only_scenarios: tuple[str, ...] = (), power_server: str = "") -> tuple[list[Item], list[str]]:
    """The plan for ``system_type`` ("edge" | "datacenter") in round ``version``, restricted to ``benchmarks``
    (package names or aliases; empty: all) and ``only_scenarios`` (empty: all; a restricted plan is no whole
    submission, and says so); with ``power_server``, a power item in place of each performance run that may carry
    power (POWER_SCENARIOS). Returns (items, notes on what was left out and why)."""
    from code.common import benchmarks as B

    rnd = rounds.current(version)
    specs = {s.name: s for s in B.all_specs()}
    wanted = {B.resolve(n).name for n in benchmarks if n != "all"}
    items: list[Item] = []
    notes: list[str] = []
    for rb in rnd.benchmarks.values():
        if wanted and rb.benchmark not in wanted:
            continue
        req = rb.required_scenarios(system_type)
        if not req:
            continue
        spec = specs.get(rb.benchmark)
        if spec is None:
            notes.append(f"{rb.name}: no harness package {rb.benchmark} is registered here: not planned")
            continue
        twin = rb.name.endswith("-edge")
        try:
            filed = rnd.entry(rb.benchmark, rb.accuracy_variant or None, edge=twin)
        except HarnessError as e:
            filed = None
            notes.append(f"{rb.name}: {e.cause}: not planned")
        if filed is None:
            continue
        if filed.name != rb.name:
            notes.append(f"{rb.name}: this harness files {rb.benchmark}'s runs under {filed.name}: not planned")
            continue
        scens = list(req)
        optional = [s for s in rb.optional(system_type) if s in spec.scenarios]
        if rb.optional(system_type):
            if optional:
                scens.append(optional[0])
                notes.append(f"{rb.name}: one of {' / '.join(rb.optional(system_type))} is required: planned "
                             f"{optional[0]}")
            else:
                notes.append(f"{rb.name}: one of {' / '.join(rb.optional(system_type))} is required, and "
                             f"{rb.benchmark} runs neither")
        missing = [s for s in scens if s not in spec.scenarios]
        for s in missing:
            notes.append(f"{rb.name}: {s} is required and {rb.benchmark} does not run it: not planned")
        has_cat = any(f.name == "category" for f in spec.fields)
        keep = {s.lower() for s in only_scenarios if s.lower() != "all"}
        if keep and any(s.lower() not in keep for s in scens):
            notes.append(f"{rb.name}: restricted to {', '.join(s for s in scens if s.lower() in keep) or 'nothing'}"
                         " (--scenarios): not a complete submission")
            scens = [s for s in scens if s.lower() in keep]
        for sc in sorted((s for s in scens if s not in missing), key=lambda s: s != "Offline"):   # Offline first
            perf = "power" if power_server and sc in POWER_SCENARIOS else "performance"
            for kind in ("accuracy", perf, *rb.for_scenario(sc).compliance_tests):
                items.append(Item(rb.name, rb.benchmark, rb.accuracy_variant, twin, has_cat, spec.generates_tokens,
                                  sc, kind, power_server if kind == "power" else ""))
    if not items:
        raise HarnessError(f"nothing to plan: {rnd.version} {system_type} has no benchmark"
                           + (f" among {', '.join(benchmarks)}" if benchmarks else "") + " this harness runs",
                           "make submission ROUND=... SYSTEM_TYPE=... (drop BENCHMARKS=, or name one the round has)")
    if power_server:
        notes.append(f"power: {sum(i.kind == 'power' for i in items)} performance runs made under the power server "
                     f"{power_server} (a ranging and a testing run each; the testing run is the result)")
    return items, notes


def fmt_s(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def render(items: list[Item], notes: list[str], rnd: rounds.Round, system_type: str, smoke: bool) -> str:
    """The plan as printed before it starts (and by --dry_run)."""
    total = sum(i.estimate_s(rnd, smoke) for i in items)
    audits = sum(i.audit for i in items)
    power = sum(i.kind == "power" for i in items)
    kind = " (smoke: short runs, never submittable)" if smoke else ""
    lines = [f"[submission] plan for {rnd.version} {system_type}{kind}:"
             f" {len(items)} items ({len(items) - audits} runs, {audits} audits"
             + (f"; {power} power item{'s' if power > 1 else ''}, a ranging and a testing run each" if power else "")
             + f"), estimated {fmt_s(total)}"]
    for i in items:
        lines.append(f"  {i.key:48s} ~{fmt_s(i.estimate_s(rnd, smoke))}")
    lines += [f"  note: {n}" for n in notes]
    return "\n".join(lines)
