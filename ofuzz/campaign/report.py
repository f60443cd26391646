"""`ofuzz report`: one self-contained HTML page per campaign (inline SVG, no assets)."""
from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import onnx

from ofuzz.store.campaign_dir import CampaignDir
from ofuzz.core.vocab import DCF, DCP, DRIFT, IF, MCF, MODE_ONLY, SPLIT, UNCONFIRMED, UNDEFINED, UNSUPPORTED
from ofuzz.triage.rootcause import SEVERITY_NAMES
from ofuzz.judge.signature import finding_id
from ofuzz.store.campaign_store import Store
from ofuzz.campaign.svg_plot import line_plot

def _graph_svg(model_path: Path, highlight: str | None, limit: int = 80) -> str:
    """A layered drawing of the model's operators; the diverging node is highlighted."""
    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:
        return "<p><em>model file not available</em></p>"
    nodes = list(model.graph.node)[:limit]
    producer = {o: i for i, n in enumerate(nodes) for o in n.output}
    depth: dict[int, int] = {}
    for i, n in enumerate(nodes):
        depth[i] = 1 + max((depth[producer[x]] for x in n.input if x in producer), default=-1)
    layers: dict[int, list[int]] = defaultdict(list)
    for i, d in depth.items():
        layers[d].append(i)
    bw, bh, gx, gy = 110, 22, 20, 30
    width = max(len(v) for v in layers.values()) * (bw + gx) + gx
    height = (max(layers) + 1) * (bh + gy) + gy
    pos = {i: (gx + k * (bw + gx), gy + d * (bh + gy)) for d, ids in layers.items() for k, i in enumerate(ids)}
    out = [f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" font-family="monospace" font-size="10">']
    for i, n in enumerate(nodes):
        for x in n.input:
            if x in producer:
                (ax, ay), (bx, by) = pos[producer[x]], pos[i]
                out.append(f'<line x1="{ax + bw / 2}" y1="{ay + bh}" x2="{bx + bw / 2}" y2="{by}" stroke="#999"/>')
    for i, n in enumerate(nodes):
        x, y = pos[i]
        hot = highlight is not None and n.name == highlight
        fill = "#f8c9c9" if hot else ("#eee" if n.op_type in ("Reshape", "Slice", "Pad", "Cast") else "#dbe8f8")
        out.append(f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="4" fill="{fill}" stroke="{"#c00" if hot else "#668"}"/>'
                   f'<text x="{x + 5}" y="{y + 15}">{html.escape(n.op_type[:16])}</text><title>{html.escape(n.name)}</title>')
    if len(model.graph.node) > limit:
        out.append(f'<text x="5" y="{height - 5}">… {len(model.graph.node) - limit} more nodes</text>')
    out.append("</svg>")
    return "".join(out)


def _engine_rows(engines: dict[str, dict[str, Any]], versions: dict[str, str]) -> list[str]:
    """One table row per engine: its statuses, the share of models and runs that reached a comparison, time, version."""
    rows = []
    for eng, d in sorted(engines.items()):
        total = sum(d.get(k, 0) for k in (DCP, DCF, IF, MCF, "SKIP")) or 1
        rows.append(f"<tr><td>{html.escape(eng)}</td>" + "".join(f"<td>{d.get(s, 0)}</td>" for s in (DCP, DCF, IF, MCF, "SKIP"))
                    + f"<td>{100 * (d.get(DCP, 0) + d.get(DCF, 0)) / total:.0f}% of models, "
                    f"{100 * (d.get(DCP, 0) + d.get(DCF, 0)) / max(total - d.get('SKIP', 0), 1):.0f}% of runs</td>"
                    + f"<td>{d['time']:.1f}</td><td>{html.escape(str(versions.get(eng, '')))}</td></tr>")
    return rows


def _card(campaign_dir: Path, f: dict[str, Any], opts: dict[str, Any]) -> str:
    """A raw signature's card: what it looked like, where it diverged, its reduced repro and how to rerun it."""
    det = f["detail"] or {}
    div = det.get("diverging") or {}
    model_file = CampaignDir(campaign_dir).model(f['first_model'])
    cmd = f"ofuzz run {model_file} --engines {','.join(opts.get('engines', []))}"
    errs = ""
    if div.get("op"):
        errs = f"<p>diverging operator: <b>{html.escape(str(div.get('op')))}</b> ({html.escape(str(div.get('node')))}), max abs {div.get('max_abs', 0):.3g}, max rel {div.get('max_rel', 0):.3g}</p>"
    elif div.get("note"):
        errs = f"<p>localisation: {html.escape(div['note'])}</p>"
    tail = det.get("log_tail", "")
    rinfo = CampaignDir(campaign_dir).finding_json(finding_id(f["signature"]))
    if rinfo.is_file():
        ri = json.loads(rinfo.read_text())
        red = ri.get("reduction", {})
        errs += (f"<p>reduced repro: <code>{html.escape(str(rinfo.parent))}</code> — {red.get('nodes_before')} → "
                 f"{red.get('nodes_after')} nodes ({html.escape('+'.join(ri.get('reduced_ops', [])))}); repro.py: "
                 f"{html.escape(str(ri.get('repro_check', '?')))}; see REPORT.md there</p>")
    return (
        f'<div class="card"><h3>{finding_id(f["signature"])} · {html.escape(f["engine"])} · {f["status"]} · {html.escape(f["op"] or "?")} · ×{f["count"]}</h3>'
        f"<p>{html.escape(f['summary'])}</p>{errs}<p class='sig'>{html.escape(f['signature'])}</p>"
        f"<p>first seen in model {html.escape(f['first_model'])}; reproduce: <code>{html.escape(cmd)}</code></p>"
        + (f"<details><summary>engine log</summary><pre>{html.escape(tail[-1500:])}</pre></details>" if tail else "")
        + "</div>"
    )


def write_report(campaign_dir: Path) -> Path:
    campaign_dir = Path(campaign_dir)
    st = Store(campaign_dir)
    opts = st.get_meta("options", {})
    versions = st.get_meta("versions", {})
    unavailable = st.get_meta("unavailable", {})
    last = st.get_meta("last_stop", {})
    tl = st.timeline()
    counts = st.counts()
    engines = st.engine_stats()
    found = st.findings()
    roots = st.root_causes()
    triage_rows = st.triage_rows()
    st.close()
    parts = {m: [(r["elapsed"], r[m.lower()] * 100) for r in tl if r[m.lower()] is not None] for m in ("OLC", "OTC", "IDC", "ODC", "SEC", "SPC")}
    uniq = {"unique findings": [(r["elapsed"], r["unique_findings"]) for r in tl]}
    elapsed = last.get("elapsed", tl[-1]["elapsed"] if tl else 0.0)
    engine_time = tl[-1]["engine_time"] if tl else 0.0
    own = last.get("own_time")
    rows = _engine_rows(engines, versions)
    per: dict[tuple[str, str], int] = defaultdict(int)
    for f in found:
        per[(f["engine"], f["status"])] += 1
    cards = [_card(campaign_dir, f, opts) for f in found]
    share = f"{100 * own / elapsed:.1f}%" if own and elapsed else "n/a"
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>ofuzz report — {html.escape(str(campaign_dir))}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}} table.rc{{font-size:12px;table-layout:fixed;width:100%}}
table.rc td{{word-break:break-word}} table.rc small{{color:#555}} .card{{border:1px solid #ccc;border-radius:6px;padding:8px 14px;margin:12px 0}}
.sig{{font-family:monospace;font-size:11px;color:#666;word-break:break-all}} code{{background:#f4f4f4;padding:1px 4px}} pre{{white-space:pre-wrap;font-size:11px}}</style>
</head><body><h1>ofuzz campaign report</h1>
<p>{html.escape(str(campaign_dir))} — {elapsed:.0f}s wall time, stopped: {html.escape(str(last.get('reason') or 'running or killed'))}.
Models generated {counts['generated']}, kept (new coverage) {counts['kept']}, run on engines {counts['run']}.
Time inside engines (summed over parallel pools) {engine_time:.0f}s; ofuzz's own main-thread share of wall time {share}.
<b>{len(roots)}</b> root causes from <b>{len(found)}</b> raw signatures.</p>
{_triage_sections(campaign_dir, roots, triage_rows, len(found))}
{_version_section(campaign_dir, roots)}
<h2>Coverage over time</h2>{line_plot(parts, "operator-level coverage (%)", "%", ymax=100)}
{line_plot(uniq, "unique findings", "count")}
<h2>Engines</h2><table><tr><th>engine</th><th>DCP</th><th>DCF</th><th>IF</th><th>MCF</th><th>SKIP (known unsupported)</th><th>reached a comparison</th><th>engine s</th><th>version</th></tr>{''.join(rows)}</table>
{('<p>skipped engines: ' + html.escape(json.dumps(unavailable)) + '</p>') if unavailable else ''}
<h2>Unique findings per engine and status</h2><table><tr><th>engine</th><th>status</th><th>unique</th></tr>
{''.join(f'<tr><td>{html.escape(e)}</td><td>{s}</td><td>{n}</td></tr>' for (e, s), n in sorted(per.items()))}</table>
<p>Note: localisation reruns a model with every intermediate tensor exposed as an output; this can change an engine's
fusion, so a divergence may vanish (reported as such) or move.</p>
<details><summary><b>All {len(found)} raw signatures</b> (how findings looked before triage; a root cause lists its own)</summary>
{''.join(cards) or '<p>none</p>'}</details>
<h2>Settings</h2><pre>{html.escape(json.dumps(opts, indent=1))}</pre>
</body></html>"""
    out = campaign_dir / "report.html"
    out.write_text(page)
    return out




_CLASS_TITLES = {DRIFT: "Numerical drift (no node diverges on its own; not a bug)",
                 UNSUPPORTED: "Unsupported constructs (capability gaps; listed once in the table below)",
                 UNDEFINED: "Inputs the ONNX spec leaves undefined (not a bug)",
                 SPLIT: "No majority (nobody can be blamed)",
                 MODE_ONLY: "Only in a mode few users run (e.g. onnx2tf's keep-shape mode; its default mode is right; not counted)",
                 UNCONFIRMED: "Unconfirmed (did not come back on re-run; not counted)"}


def _version_section(campaign_dir: Path, roots: list[dict]) -> str:
    """Root causes one version of an engine has and another does not (a campaign with NAME@VERSION engines)."""
    from ofuzz.campaign.versions import campaign_differences

    diffs = campaign_differences(campaign_dir, [{**r.get("detail", {}), **r} for r in roots]) if roots else []
    if not diffs:
        return ""
    by_id = {r["id"]: r for r in roots}
    rows = "".join(f"<tr><td>{html.escape(d['id'])}</td><td>{html.escape(d['kind'])}</td><td>{html.escape(d['text'])}</td>"
                   f"<td>{html.escape('+'.join(by_id.get(d['id'], {}).get('key', {}).get('ops', [])))}</td>"
                   f"<td><code>{html.escape(str(by_id.get(d['id'], {}).get('repro') or ''))}</code></td></tr>" for d in diffs)
    return (f"<h2>Version differences: {len(diffs)}</h2><p>Root causes blamed on one version of an engine while another version "
            "passed the same model and its reduced repro. Check each with <code>ofuzz replay DIR -e A,B</code>.</p>"
            f"<table><tr><th>root cause</th><th>kind</th><th>what</th><th>operator(s)</th><th>repro</th></tr>{rows}</table>")


def _triage_sections(campaign_dir: Path, roots: list[dict], rows: list[dict], n_signatures: int) -> str:
    """Root causes first (by engine, worst first), then the other classes collapsed, then the capability table."""
    if not rows:
        return "<h2>Root causes</h2><p>not triaged yet: run <code>ofuzz bugs DIR</code></p>"
    by_class: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_class[r["klass"]].append(r)
    out = [f"<h2>Root causes: {len(roots)}</h2><p>{n_signatures} raw signatures triaged: "
           + ", ".join(f"{k} {len(v)}" for k, v in sorted(by_class.items())) + ". A root cause is a distinct defect of the blamed engine "
           "(same reduced operators, remaining attributes and input traits); worst first.</p>"]
    by_engine: dict[str, list[dict]] = defaultdict(list)
    for r in roots:
        by_engine[r["engine"]].append(r)
    for eng, rs in sorted(by_engine.items()):
        out.append(f"<h3>{html.escape(eng)}: {len(rs)}</h3><table class='rc'><colgroup><col style='width:9%'><col style='width:9%'>"
                   "<col style='width:11%'><col style='width:16%'><col style='width:16%'><col style='width:6%'><col style='width:6%'>"
                   "<col style='width:6%'><col style='width:21%'></colgroup><tr><th>id</th><th>severity</th><th>failure</th><th>operator(s)</th>"
                   "<th>attributes</th><th>traits</th><th>signatures</th><th>occurrences</th><th>repro</th></tr>")
        for r in rs:
            k = r["key"]
            repro = r.get("repro") or ""
            nodes = r.get("nodes")
            out.append(f"<tr><td>{r['id']}</td><td>{html.escape(SEVERITY_NAMES.get(r['severity'], str(r['severity'])))}</td>"
                       f"<td>{html.escape(k['status'] + ' ' + k['failure'])}</td><td>{html.escape('+'.join(k['ops'] or r.get('held', [])))}</td>"
                       f"<td>{html.escape(', '.join(k['attrs']))}</td><td>{html.escape(', '.join(k['traits']))}</td>"
                       f"<td title='{html.escape(' / '.join(r['signatures']))}'>{len(r['signatures'])}</td><td>{r['occurrences']}</td>"
                       f"<td><code>{html.escape(repro)}</code>{f' ({nodes} nodes)' if nodes is not None else ''}<br>"
                       f"<small>{html.escape(str(r.get('summary', ''))[:160])}</small>"
                       + (f"<details><summary>graph</summary>{_graph_svg(campaign_dir / repro / 'model.onnx', None)}</details>" if repro else "")
                       + "</td></tr>")
        out.append("</table>")
    for klass, title in _CLASS_TITLES.items():
        items = by_class.get(klass, [])
        if not items:
            continue
        lis = "".join(f"<li><code>{html.escape(r['signature'])}</code> — {html.escape(_reason(r))}</li>" for r in items[:500])
        out.append(f"<details><summary><b>{html.escape(title)}: {len(items)}</b></summary><ul>{lis}</ul></details>")
    gaps: dict[str, dict] = {}
    for r in by_class.get(UNSUPPORTED, []):
        g = (r["detail"].get("class_detail") or {}).get("gap")
        if g:
            gaps.setdefault(g["key"], {**g, "n": 0})["n"] += 1
    if gaps:
        out.append("<h3>Engine capability table (what each engine said it does not support)</h3><table><tr><th>engine</th><th>operator</th>"
                   "<th>attribute</th><th>signatures</th></tr>" + "".join(
                       f"<tr><td>{html.escape(g['engine'])}</td><td>{html.escape(str(g.get('op') or '?'))}</td>"
                       f"<td>{html.escape(str(g.get('attribute') or ''))}</td><td>{g['n']}</td></tr>" for g in sorted(gaps.values(), key=lambda g: g["key"]))
                   + "</table>")
    return "".join(out)


def _reason(row: dict) -> str:
    d = row["detail"].get("class_detail") or {}
    if UNDEFINED in d:
        return d[UNDEFINED].get("why", "")
    if "gap" in d:
        return f"{d['gap'].get('op') or '?'} {d['gap'].get('attribute') or ''} ({d['gap'].get('rule')})"
    iso = d.get("isolation") or {}
    if iso:
        return iso.get("note") or "; ".join(iso.get("tried") or [])
    if row["klass"] == UNCONFIRMED:
        return f"status on re-run: {row['detail'].get('status_on_rerun', '?')}"
    return ""
