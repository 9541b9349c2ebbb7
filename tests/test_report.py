"""make report: the summary table, the pictures and SDXL's compliance images, from real tiny runs
(ResNet50 Offline/Server/accuracy, SDXL accuracy, a Llama2 Offline run with its token timings), checked
as data (summary.json) and as a person sees it: headless Chromium renders index.html, and the test
reads the rendered DOM and crops every picture out of the screenshot (kept as
build/report-test/screenshot.png)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import REPO, offline_samples, run_main

CHROMIUM = next((shutil.which(c) for c in ("chromium", "chromium-browser", "google-chrome") if shutil.which(c)), None)
SHOT_DIR = REPO / "build" / "report-test"


@pytest.fixture(scope="module")
def runs(tiny_resnet, tiny_sdxl, tiny_llama, tmp_path_factory) -> Path:
    logs = tmp_path_factory.mktemp("report_logs")
    tiny = ("--model_variant=tiny", f"--log_dir={logs}")
    run_main("--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", *offline_samples(128), *tiny,
             env=tiny_resnet, check=True)
    run_main("--action=run_harness", "--benchmarks=resnet50", "--scenarios=Server", "--min_duration=2000",
             "--min_query_count=64", *tiny, env=tiny_resnet, check=True)
    run_main("--action=run_harness", "--benchmarks=resnet50", "--scenarios=Offline", "--test_mode=AccuracyOnly",
             *tiny, env=tiny_resnet, check=True)
    run_main("--action=run_harness", "--benchmarks=sdxl", "--scenarios=Offline", "--test_mode=AccuracyOnly",
             "--sdxl_sample_count=10", "--fast", *tiny, env=tiny_sdxl, check=True)
    run_main("--action=run_harness", "--benchmarks=llama2_70b", "--scenarios=Offline", *offline_samples(16), *tiny,
             env=tiny_llama, check=True)
    return logs


@pytest.fixture(scope="module")
def report(runs, tiny_resnet, tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("report") / "report"
    r = run_main("--action=report", f"--report_logs={runs}", f"--report_dir={out}", env=tiny_resnet, check=True)
    return out, json.loads((out / "summary.json").read_text()), r.stdout


def by(summary: dict, benchmark: str, scenario: str, mode: str) -> dict:
    rows = [r for r in summary["runs"] if (r["benchmark"], r["scenario"], r["mode"]) == (benchmark, scenario, mode)]
    assert len(rows) == 1, [(r["benchmark"], r["scenario"], r["mode"]) for r in summary["runs"]]
    return rows[0]


def test_report_summary_json_holds_every_run(report):
    out, summary, stdout = report
    assert len(summary["runs"]) == 5
    assert {(r["benchmark"], r["scenario"], r["mode"]) for r in summary["runs"]} == {
        ("resnet50", "Offline", "Performance"), ("resnet50", "Server", "Performance"),
        ("resnet50", "Offline", "Accuracy"), ("sdxl", "Offline", "Accuracy"), ("llama2_70b", "Offline", "Performance")}
    assert f"wrote {out / 'index.html'} (5 run(s)" in stdout
    md = (out / "summary.md").read_text().splitlines()
    assert md[0].startswith("| system | benchmark | scenario | mode") and len(md) == 2 + 5
    assert not list(out.parent.glob("*.partial"))


def test_report_resnet50_accuracy_as_percent_of_reference_and_target(report):
    r = by(report[1], "resnet50", "Offline", "Accuracy")
    a = next(x for x in r["accuracy"] if x["metric"] == "acc")
    assert a["reference"] == pytest.approx(76.46) and a["target"] == pytest.approx(76.46 * 0.99)
    assert a["pct_of_reference"] == pytest.approx(100 * a["value"] / 76.46, abs=1e-3)
    assert a["pct_of_target"] == pytest.approx(100 * a["value"] / (76.46 * 0.99), abs=1e-3)
    assert r["validity"] == {True: "PASS", False: "FAIL", None: "-"}[r["accuracy_passed"]]
    assert r["submission_name"] == "resnet"


def test_report_sdxl_accuracy_range_reference(report):
    r = by(report[1], "sdxl", "Offline", "Accuracy")
    clip = next(x for x in r["accuracy"] if x["metric"] == "CLIP_SCORE")
    assert clip["reference"] == pytest.approx((31.68631873 + 31.81331801) / 2)
    assert clip["upper_limit"] == pytest.approx(31.81331801)


def test_report_sdxl_shows_the_compliance_images_with_captions(report):
    out, summary, _ = report
    r = by(summary, "sdxl", "Offline", "Accuracy")
    assert len(r["images"]) == 10 and all(i["caption"] for i in r["images"])
    assert all((out / "img" / i["file"]).stat().st_size > 0 for i in r["images"])


def test_report_performance_runs_have_latency_pictures_matching_loadgen(report):
    out, summary, _ = report
    for scen in ("Offline", "Server"):
        r = by(summary, "resnet50", scen, "Performance")
        kinds = {p["kind"] for p in r["pictures"]}
        assert kinds == {"latency-hist", "latency-pct", "throughput"}, kinds
        s = r["sut_latency_ms"]
        assert s["samples"] >= 64 and 0 < s["p50"] <= s["p90"] <= s["p99"] <= s["max"]
        lg = dict(r["loadgen_percentiles_ms"])
        # the SUT sees each sample after LoadGen issued it and before LoadGen records its completion
        assert s["p99"] <= lg[99.0] * 1.05 + 1.0, (s, lg)
        assert all((out / "img" / p["file"]).stat().st_size > 1000 for p in r["pictures"])


def test_report_llm_has_ttft_tpot_and_tokens_per_second(report):
    r = by(report[1], "llama2_70b", "Offline", "Performance")
    assert {p["kind"] for p in r["pictures"]} == {"latency-hist", "latency-pct", "tokens", "throughput"}
    t = r["sut_token_latency_ms"]
    assert 0 < t["ttft_p50"] <= t["ttft_p99"] and 0 < t["tpot_p50"] <= t["tpot_p99"]
    assert r["tokens"]["tokens_per_second"] > 0


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (apt-get install chromium); "
                                             ".ci/run installs it where apt-get works")
def test_report_page_renders_in_headless_chromium(report, tmp_path):
    from PIL import Image

    out, summary, _ = report
    url = (out / "index.html").as_uri()
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,1200"]
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    start = dom.index('<pre id="layout"')
    layout = json.loads(dom[dom.index(">", start) + 1:dom.index("</pre>", start)].replace("&quot;", '"'))
    imgs = layout["images"]
    n_pics = sum(len(r["pictures"]) + len(r["images"]) for r in summary["runs"])
    assert len(imgs) == n_pics and all(i["ok"] and i["w"] > 0 and i["h"] > 0 for i in imgs), imgs
    assert 'id="summary"' in dom and dom.count("<tr data-run=") == 5
    for text in ("MLPerf Inference harness report", "resnet", "stable-diffusion-xl", "llama2-70b", "VALID",
                 "% of reference", "Compliance images (10)"):
        assert text in dom, text
    assert '<p id="broken"></p>' in dom           # the page's own check found no broken picture

    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    shot = SHOT_DIR / "screenshot.png"
    height = min(int(layout["height"]) + 20, 16000)
    subprocess.run(base[:-1] + [f"--window-size=1400,{height}", f"--screenshot={shot}", url],
                   capture_output=True, timeout=120, check=True)
    page = np.asarray(Image.open(shot).convert("L"), dtype=np.float32)
    assert page.shape[1] == 1400
    for i in imgs:                                 # every picture drawn where the DOM says, and not blank
        x, y, w, h = (int(round(i[k])) for k in ("x", "y", "w", "h"))
        if y + h > page.shape[0]:
            continue
        region = page[y:y + h, x:x + w]
        assert region.std() > 8, (i["src"], float(region.std()))
    table = page[int(imgs[0]["y"]) - 40:int(imgs[0]["y"]) - 5] if imgs[0]["y"] > 60 else page[:200]
    assert table.min() < 100                       # text above the first picture is drawn
    print(f"report screenshot: {shot} ({page.shape[1]}x{page.shape[0]}, {len(imgs)} pictures)")


def test_report_without_runs_is_one_line_error(tiny_resnet, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    r = run_main("--action=report", f"--report_logs={empty}", f"--report_dir={tmp_path / 'rep'}", env=tiny_resnet)
    assert r.returncode == 2 and "no runs under" in r.stderr and "fix: make run_harness" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "rep").exists()
    r = run_main("--action=report", f"--report_logs={tmp_path / 'missing'}", env=tiny_resnet)
    assert r.returncode == 2 and "is not a folder" in r.stderr
    r = run_main("--action=report", "--report_log=x", env=tiny_resnet)
    assert r.returncode == 2 and "report_logs" in r.stderr     # the nearest name


def test_report_replaces_an_old_report_whole(report, runs, tiny_resnet):
    out, _, _ = report
    (out / "stale.txt").write_text("from an older report")
    run_main("--action=report", f"--report_logs={runs}", f"--report_dir={out}", "--benchmarks=resnet",
             "--scenarios=Offline", env=tiny_resnet, check=True)
    assert not (out / "stale.txt").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert {(r["benchmark"], r["scenario"]) for r in summary["runs"]} == {("resnet50", "Offline")}
    assert not list(out.parent.glob(".*partial"))


def test_timeline_expands_batches_and_llm_samples(tmp_path):
    from code.common.harness import timeline

    t = timeline.Timeline()
    t.batch(10.0, 10.5, 3)                      # Offline: one issue time for the batch
    t.batch([10.1, 10.2], 10.3, 2)              # Server: one arrival per sample
    a = t.arrays()
    assert a["issue_s"].tolist() == pytest.approx([0.1, 0.2, 0, 0, 0]) and len(t) == 5
    assert a["done_s"].tolist() == pytest.approx([0.3, 0.3, 0.5, 0.5, 0.5])
    assert t.save(tmp_path)["samples"] == 5 and timeline.load(tmp_path)["done_s"].size == 5
    llm = timeline.Timeline()
    llm.sample(1.0, 1.2, 2.0, 9)
    assert set(llm.arrays()) == {"issue_s", "first_s", "done_s", "tokens"}
    assert timeline.Timeline().save(tmp_path / "none") is None and timeline.load(tmp_path / "none") is None


def test_every_round_target_has_a_reference():
    from code.common.rounds import ROUNDS

    for rnd in ROUNDS.values():
        for e in rnd.benchmarks.values():
            for m, lo in e.accuracy_min.items():
                ref = e.accuracy_reference(m)
                assert ref and lo <= ref * 1.0000001, (rnd.version, e.name, m)
                if m in e.accuracy_max:
                    assert ref <= e.accuracy_max[m]


@pytest.mark.parametrize("case", ["run_logs", "plain_file"])
def test_report_never_replaces_a_folder_it_did_not_write(runs, tiny_resnet, tmp_path, case):
    """--report_dir naming the run logs themselves (plus a notes file), or a plain file: a one-line error before
    anything is written, and every file still there, byte for byte."""
    if case == "run_logs":
        target = tmp_path / "logs"
        shutil.copytree(runs, target)
        (target / "notes.txt").write_text("keep me\n")
    else:
        target = tmp_path / "report.html"
        target.write_text("<p>mine</p>\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    r = run_main("--action=report", f"--report_logs={runs}", f"--report_dir={target}", env=tiny_resnet)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and str(target) in err[0], r.stderr
    assert ("did not write" if case == "run_logs" else "is a file") in err[0]
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_report_survives_a_damaged_latest_pointer_and_record(runs, tiny_resnet, tmp_path):
    """A binary build/logs/LATEST is a missing pointer (the one-line "no runs" error), and a metadata.json whose
    "results" is a list is drawn without LoadGen's percentiles, not an internal error."""
    build = tmp_path / "build"
    (build / "logs").mkdir(parents=True)
    (build / "logs" / "LATEST").write_bytes(b"\x00\xff\xfe binary\n")
    r = run_main("--action=report", env={**tiny_resnet, "MLPERF_BUILD_DIR": str(build)})
    assert r.returncode == 2 and "no runs to report" in r.stderr and "Traceback" not in r.stderr, r.stderr
    logs = tmp_path / "logs"
    shutil.copytree(runs, logs)
    md = next(p for p in logs.rglob("metadata.json") if '"Server"' in p.read_text())
    meta = json.loads(md.read_text())
    meta["results"] = [1, 2]
    md.write_text(json.dumps(meta))
    r = run_main("--action=report", f"--report_logs={logs}", f"--report_dir={tmp_path / 'rep'}", "--benchmarks=resnet",
                 env=tiny_resnet)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr


def test_report_pool_and_reuse_give_the_same_report(report, runs, tmp_path, monkeypatch):
    """The pictures drawn in worker processes are the sequential ones byte for byte, with the same row figures; a
    second report over the same runs links the pictures of unchanged runs (same inode) and redraws a changed one;
    a damaged sample timeline is a warning naming the file, the run still in the table (issue 27: `make report`
    over 1,000 runs; scripts/bench_report.py measures it)."""
    import os

    from code.common import report as rep

    _, summary, _ = report
    monkeypatch.setenv("MLPERF_PROGRESS", "0")
    monkeypatch.setattr(rep, "POOL_FROM", 1)
    chosen, roots = rep.select({"report_logs": [str(runs)]})
    pooled = rep.build(chosen, roots, tmp_path / "pool", workers=2)
    sequential = rep.build(chosen, roots, tmp_path / "seq", workers=1)

    def figures(s):          # as summary.json holds them
        return [{k: v for k, v in r.items() if k != "pictures"} for r in json.loads(json.dumps(s))["runs"]]
    assert figures(pooled) == figures(summary)
    files = [p["file"] for r in pooled["runs"] for p in r["pictures"]]
    assert len(files) >= 6 and files == [p["file"] for r in sequential["runs"] for p in r["pictures"]]
    for f in files:
        assert (tmp_path / "pool" / "img" / f).read_bytes() == (tmp_path / "seq" / "img" / f).read_bytes(), f

    server = next(c for c in chosen if c.meta.get("scenario") == "Server")
    tl = server.dir / "sample_timeline.npz"
    backup = tl.read_bytes()
    os.utime(tl, ns=(tl.stat().st_atime_ns, tl.stat().st_mtime_ns + 10**9))     # a changed run: a new key
    again = rep.build(chosen, roots, tmp_path / "again", reuse=tmp_path / "pool" / "img", workers=1)
    changed = {p["file"] for r in again["runs"] if r["scenario"] == "Server" for p in r["pictures"]}
    for f in (p["file"] for r in again["runs"] for p in r["pictures"]):
        same = (tmp_path / "again" / "img" / f).stat().st_ino == (tmp_path / "pool" / "img" / f).stat().st_ino \
            if (tmp_path / "pool" / "img" / f).exists() else False
        assert same == (f not in changed), f
    assert figures(again) == figures(summary)

    try:
        tl.write_bytes(backup[: len(backup) // 2])                   # a damaged timeline
        chosen, roots = rep.select({"report_logs": [str(runs)]})
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            damaged = rep.build(chosen, roots, tmp_path / "damaged", workers=1)
        assert f"{tl}: unreadable sample timeline" in err.getvalue(), err.getvalue()
        row = next(r for r in damaged["runs"] if r["scenario"] == "Server")
        assert row["pictures"] == [] and row["metric"] == next(r for r in summary["runs"] if r["scenario"] == "Server")["metric"]
    finally:
        tl.write_bytes(backup)
