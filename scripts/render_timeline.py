#!/usr/bin/env python3
"""Renders a `megatron train --profile` timeline (Trace Event Format JSON) as a PNG.

One horizontal lane per rank (named by the trace's process_name metadata),
spans coloured by kind: forward, backward, the pipeline bubble (receive
waits), collectives and waits on them, gradient sync, optimizer step,
checkpoint save. The iteration spans are drawn as the lane's background.

    python3 scripts/render_timeline.py TRACE.json OUT.png [--iteration N]

Needs matplotlib (Debian: apt-get install python3-matplotlib).
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

# (colour, vertical offset in the lane, height), drawn in this order.
STYLE = {
    "iteration": ("#eeeeee", -0.45, 0.9),
    "forward": ("#4c72b0", -0.3, 0.6),
    "backward": ("#55a868", -0.3, 0.6),
    "pipeline_recv": ("#c44e52", -0.3, 0.6),
    "pipeline_send": ("#dd8452", -0.3, 0.6),
    "grad_sync": ("#8c613c", -0.3, 0.6),
    "optimizer": ("#937860", -0.3, 0.6),
    "checkpoint": ("#222222", -0.3, 0.6),
    "collective": ("#8172b3", 0.32, 0.12),
    "comm_start": ("#da8bc3", 0.32, 0.12),
    "comm_wait": ("#da8bc3", 0.32, 0.12),
}
LABEL = {
    "forward": "forward",
    "backward": "backward",
    "pipeline_recv": "pipeline bubble (receive wait)",
    "pipeline_send": "pipeline send",
    "grad_sync": "gradient sync",
    "optimizer": "optimizer step",
    "checkpoint": "checkpoint save",
    "collective": "collective (thin strip)",
    "comm_wait": "wait on non-blocking comm",
}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--iteration", type=int, default=None, help="only this iteration")
    a = p.parse_args()
    with open(a.trace) as f:
        trace = json.load(f)
    names, spans = {}, []
    for e in trace["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "process_name":
            names[e["pid"]] = e["args"]["name"]
        elif e["ph"] == "X":
            if a.iteration is not None and e["args"].get("iteration") != a.iteration:
                continue
            spans.append(e)
    if not spans:
        sys.exit("render_timeline: no spans to draw in " + a.trace)
    t0 = min(e["ts"] for e in spans)
    ranks = sorted(names) or sorted({e["pid"] for e in spans})
    lane = {pid: i for i, pid in enumerate(reversed(ranks))}
    fig, ax = plt.subplots(figsize=(14, 0.9 * len(ranks) + 1.6))
    for cat in STYLE:
        colour, off, height = STYLE[cat]
        by_lane = {}
        for e in spans:
            if e["cat"] == cat and e["pid"] in lane:
                by_lane.setdefault(e["pid"], []).append(
                    ((e["ts"] - t0) / 1e3, max(e["dur"], 1.0) / 1e3))
        for pid, bars in by_lane.items():
            ax.broken_barh(bars, (lane[pid] + off, height), facecolors=colour, linewidth=0)
    ax.set_yticks([lane[pid] for pid in ranks])
    ax.set_yticklabels([names.get(pid, "rank %d" % pid) for pid in ranks])
    ax.set_ylim(-0.6, len(ranks) - 0.4)
    ax.set_xlabel("time (ms) from the start of the profiled range")
    other = trace.get("otherData", {})
    title = "megatron.cpp timeline, %s, iterations %s-%s" % (
        other.get("layout", ""), other.get("first_iteration", "?"), other.get("last_iteration", "?"))
    if a.iteration is not None:
        title += " (iteration %d shown)" % a.iteration
    ax.set_title(title)
    ax.legend(handles=[Patch(color=STYLE[c][0], label=LABEL[c]) for c in LABEL],
              loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=5, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("render_timeline: %d spans of %d ranks -> %s" % (len(spans), len(ranks), a.out))


if __name__ == "__main__":
    main()
