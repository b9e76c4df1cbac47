"""The PNG of an A/B benchmark (`--plot`): each arm's samples and the paired speedups. Needs matplotlib."""

from .pairs import ARM_NAMES


def write_plot(path: str, title: str, summary: dict) -> None:
    """Save a PNG with each arm's samples (box plot and points) and the paired speedups. Needs matplotlib."""
    try:
        import matplotlib
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib: pip install 'tileblend[bench]'") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, (times, speedups) = pyplot.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    labels = [ARM_NAMES[arm] for arm in summary["arms"]]
    samples = [[s for process in stats["samples_ms"] for s in process] for stats in summary["arms"].values()]
    times.boxplot(samples, tick_labels=labels, showfliers=False)
    for position, arm_samples in enumerate(samples, start=1):
        offsets = [position + 0.08 * ((k % 5) - 2) for k in range(len(arm_samples))]
        times.plot(offsets, arm_samples, "o", alpha=0.5, markersize=4)
    times.set_ylabel("ms per call")
    times.set_title("per-arm samples")
    pairs = list(range(1, len(summary["speedups"]) + 1))
    speedups.bar(pairs, summary["speedups"], color="tab:green")
    speedups.axhline(1.0, color="gray", linestyle="--")
    speedups.set_xticks(pairs)
    speedups.set_xlabel("pair")
    speedups.set_ylabel("speedup (A median / B median)")
    speedups.set_title("paired speedup")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    try:
        with open(path, "wb") as file:  # a write error reaches the caller (a path given to savefig may lose it)
            figure.savefig(file, format="png", dpi=120)
    finally:
        pyplot.close(figure)
