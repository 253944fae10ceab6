"""The testbed's plot: the CDFs of queue and response time, simulated (replication 0, the
requests that were sent) against measured, one panel pair per policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import numpy as np


def _cdf(ax: Any, values: "np.ndarray", label: str, style: str) -> None:
    if len(values) == 0:
        return
    x = np.sort(values)
    ax.plot(x * 1e3, np.arange(1, len(x) + 1) / len(x), style, label=label)


def cdf_plot(path: Path, doc: Dict[str, Any], records: Dict[str, List[Dict[str, Any]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = doc["results"]
    fig, axes = plt.subplots(len(results), 2, figsize=(10, 3.6 * len(results)), squeeze=False)
    for row, result in zip(axes, results):
        rows = [r for r in records[result["policy"]] if r["status"] == 200 and r["app_start"] != ""]
        queue = np.array([r["app_start"] - r["sent"] for r in rows])
        response = np.array([r["done"] - r["sent"] for r in rows])
        sim = result["simulated"]["per_replication"][0] if result.get("simulated") else None
        for ax, name, values in ((row[0], "queue", queue), (row[1], "response", response)):
            _cdf(ax, values, "measured", "-")
            if sim is not None:  # None: not simulated (services whose calls the engine refuses)
                # The simulation's percentiles of the same requests (replication 0).
                stats = sim[name]
                ps = [0.5, 0.9, 0.95, 0.99, 0.999]
                ax.plot([stats[k] * 1e3 for k in ("p50", "p90", "p95", "p99", "p999")], ps, "o--",
                        label="simulated (percentiles)")
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xlabel(f"{name} time (ms)")
            ax.set_ylabel("fraction of requests")
            ax.set_title(f"{result['policy']}: {name}")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
