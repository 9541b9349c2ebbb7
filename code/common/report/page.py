"""The report's text forms: index.html (summary table, each run's pictures, SDXL's compliance images)
and summary.md. Everything shown comes from the rows (``code.common.report.rows``); every string is
escaped.

The page checks itself when it loads: a small script records each picture's size and place in
``#layout`` (JSON) and shows a warning line when a picture failed to load, so a broken report says so
to the person reading it (and headless Chromium's DOM dump tells the tests the same).
"""
from __future__ import annotations

import html
import json

from code.common.report.rows import accuracy_text

COLUMNS = ("system", "benchmark", "scenario", "mode", "model / backend / precision", "metric", "validity",
           "accuracy (% of reference, % of target)", "notes")

CSS = """
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #bbb; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #e8eef6; }
td.VALID, td.PASS { background: #dff3e2; } td.INVALID, td.FAIL, td.ERROR { background: #f8dcdc; }
.pics { display: flex; flex-wrap: wrap; gap: 12px; }
.pics figure, .gallery figure { margin: 0; }
figcaption { font-size: 12px; color: #444; max-width: 640px; }
.gallery { display: flex; flex-wrap: wrap; gap: 10px; }
.gallery img { width: 192px; height: 192px; object-fit: cover; border: 1px solid #999; }
#broken { color: #a00; font-weight: bold; }
.meta { font-size: 12px; color: #555; }
"""

SELF_CHECK = """
window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images), out = [], broken = 0;
  imgs.forEach(function (im) {
    var r = im.getBoundingClientRect();
    var ok = im.complete && im.naturalWidth > 0;
    if (!ok) { broken += 1; }
    out.push({src: im.getAttribute("src"), ok: ok, x: r.left + window.scrollX, y: r.top + window.scrollY,
              w: r.width, h: r.height});
  });
  document.getElementById("layout").textContent = JSON.stringify(
    {images: out, width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight});
  if (broken) { document.getElementById("broken").textContent = broken + " picture(s) failed to load"; }
});
"""


def _e(v) -> str:
    return html.escape("-" if v is None else str(v))


def cells(r: dict) -> tuple[str, ...]:
    return (r["system"], r["submission_name"] or r["benchmark"], r["scenario"], r["mode"],
            f"{r['model_variant']} / {r['backend']} / {r['precision']}", r["metric_text"], r["validity"],
            accuracy_text(r), "; ".join(r["notes"]))


def markdown(rows: list[dict]) -> str:
    def md(v) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(md(c) for c in cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _table(rows: list[dict]) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in COLUMNS)
    body = []
    for r in rows:
        tds = []
        for i, c in enumerate(cells(r)):
            cls = f' class="{_e(c)}"' if COLUMNS[i] == "validity" else ""
            text = f'<a href="#{r["id"]}">{_e(c)}</a>' if i == 1 else _e(c)
            tds.append(f"<td{cls}>{text}</td>")
        body.append(f'<tr data-run="{r["id"]}">' + "".join(tds) + "</tr>")
    return f'<table id="summary"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _latency_line(r: dict) -> str:
    s = r.get("sut_latency_ms")
    if not s:
        return ""
    parts = [f"{k} {s[k]:.4g} ms" for k in ("p50", "p90", "p99", "max") if s.get(k) is not None]
    text = f"SUT-side latency over {s['samples']} samples: " + ", ".join(parts)
    lg = dict(r["loadgen_percentiles_ms"])
    if lg.get(99.0) is not None:
        text += f" (LoadGen p99 {lg[99.0]:.4g} ms)"
    t = r.get("sut_token_latency_ms")
    if t:
        text += f"; TTFT p50/p99 {t['ttft_p50']:.4g}/{t['ttft_p99']:.4g} ms, TPOT p50/p99 {t['tpot_p50']:.4g}/{t['tpot_p99']:.4g} ms"
    return f'<p class="meta">{_e(text)}</p>'


def _power_line(r: dict) -> str:
    p = r.get("power")
    if not p:
        return ""
    if not p.get("available"):
        return f'<p class="meta">{_e("Informative power: none (" + str(p.get("reason")) + ")")}</p>'
    from code.common.power.sampler import text

    src = "; ".join(str(v) for v in (p.get("sources") or {}).values())
    energy = (p.get("energy_j") or {}).get("total", 0.0)
    line = f"Informative power over {p.get('window_s')} s: {text(p)}; energy {energy:.4g} J ({src})"
    return f'<p class="meta">{_e(line)}</p>'


def _run_section(r: dict) -> str:
    title = f"{r['system']} · {r['submission_name'] or r['benchmark']} · {r['scenario']} · {r['mode']}"
    parts = [f'<section class="run" id="{r["id"]}"><h2>{_e(title)}</h2>',
             f'<p class="meta">{_e(r["dir"])} · {_e(r["validity"])} · {_e(r["metric_text"])} · '
             f'accuracy {_e(accuracy_text(r))} · finished {_e(r["finished"])}</p>', _latency_line(r), _power_line(r)]
    if r["pictures"]:
        figs = "".join(f'<figure><img src="img/{_e(p["file"])}" alt="{_e(p["title"])}" width="640" height="360">'
                       f'<figcaption>{_e(p["title"])}</figcaption></figure>' for p in r["pictures"])
        parts.append(f'<div class="pics">{figs}</div>')
    elif r["mode"] != "Accuracy":
        parts.append('<p class="meta">No per-sample timeline in this run folder (written by runs since the '
                     'report existed), so no latency pictures.</p>')
    if r["images"]:
        figs = "".join(f'<figure><img src="img/{_e(i["file"])}" alt="{_e(i["caption"])}" width="192" height="192">'
                       f'<figcaption>#{_e(i["qsl_idx"])}: {_e(i["caption"])}</figcaption></figure>'
                       for i in r["images"])
        parts.append(f'<h3>Compliance images ({len(r["images"])}) with their captions</h3><div class="gallery">{figs}</div>')
    parts.append("</section>")
    return "\n".join(p for p in parts if p)


def page(rows: list[dict], info: dict) -> str:
    sources = ", ".join(info["sources"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>MLPerf Inference harness report</title>
<style>{CSS}</style></head>
<body>
<h1>MLPerf Inference harness report</h1>
<p class="meta">{len(rows)} run(s) from {_e(sources)} · generated {_e(info["generated"])} ·
latencies in the pictures are measured at the SUT (issue_queries to QuerySamplesComplete); LoadGen's own
percentiles are the orange markers. Also: <a href="summary.json">summary.json</a>, <a href="summary.md">summary.md</a>.</p>
<p id="broken"></p>
{_table(rows)}
{"".join(_run_section(r) for r in rows)}
<pre id="layout" hidden>{_e(json.dumps({"images": None}))}</pre>
<script>{SELF_CHECK}</script>
</body></html>
"""
