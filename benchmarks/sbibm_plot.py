"""The sbibm benchmark's figure: C2ST against the simulation budget, one panel per task, as in sbibm's."""

from __future__ import annotations

import io

import numpy as np

from cli_args import not_a_script
from sbibm_method import AMORTISED, Method, method_of
from sbibm_tables import BUDGETS, TASKS
not_a_script(__name__, __file__)  # run as a script: name the one to run


def plot(cells: dict, paper: dict, left_out: dict | None = None) -> bytes:
    """The PNG of one panel per task, C2ST against the simulation budget, as in sbibm's figure; a budget whose job
    is ``left_out`` (``{cell: why}``) is named in its panel, not just missing from it; each sequential method's
    points are their own series (diamonds), beside the amortised ones, named in that panel's legend."""
    from gensbi_sharding.harness.agg_figure import agg_figure  # MPLBACKEND=<a name matplotlib lacks> is ignored

    fig = agg_figure(figsize=(13, 6.2))
    axes = fig.subplots(2, 4, sharey=True).ravel()
    for ax, task in zip(axes, TASKS):
        for label, key, style in (("sbibm NPE", "npe", dict(color="C0", marker="s")),
                                  ("sbibm best", "best", dict(color="0.5", marker="^", linestyle="--"))):
            means = [float(paper[(task, b)][f"{key}_mean"]) for b in BUDGETS]
            sds = [float(paper[(task, b)][f"{key}_sd"]) for b in BUDGETS]
            ax.errorbar(BUDGETS, means, yerr=sds, label=label, capsize=3, **style)
        methods = sorted({method_of(cell) for cell in cells if cell[0] == task}, key=lambda m: (m != AMORTISED, m))
        for n, method in enumerate(methods):
            ours = sorted((cell[1], np.array([float(r["c2st"]) for r in rows])) for cell, rows in cells.items()
                          if cell[0] == task and method_of(cell) == method)
            style = (dict(color="k", marker="o", label="this harness (flow matching)") if method == AMORTISED else
                     dict(color=f"C{2 + n}", marker="D", linestyle="none",
                          label=f"sequential, {Method.from_label(method).short}"))
            ax.errorbar([b for b, _ in ours], [v.mean() for _, v in ours],
                        yerr=[v.std(ddof=1) if len(v) > 1 else 0.0 for _, v in ours], capsize=3, linewidth=2, **style)
            for b, v in ours:  # the title's "10 observations" is not this point's: say how many it averages
                if len(v) != 10:
                    ax.annotate(f"{len(v)} obs.", (b, v.mean()), xytext=(6, 4), textcoords="offset points",
                                fontsize="x-small")
        if ax is not axes[0] and any(m != AMORTISED for m in methods):  # axes[0]'s legend names the others
            ax.legend(handles=ax.get_legend_handles_labels()[0][-sum(m != AMORTISED for m in methods):],
                      loc="upper right", fontsize="x-small").set_in_layout(False)  # the panels keep their size
        gaps = [f"{cell[1]:,}{'' if len(cell) == 2 else ', sequential ' + Method.from_label(method_of(cell)).short}"
                f": not counted ({why})"
                for cell, why in sorted((left_out or {}).items()) if cell[0] == task]
        if gaps:
            ax.text(0.03, 0.03, "\n".join(gaps), transform=ax.transAxes, fontsize="x-small", color="C3")
        ax.set_xscale("log")
        ax.set_xticks(BUDGETS, ["10³", "10⁴", "10⁵"])
        # The three budgets are the ticks; the log scale's unlabelled minor ticks (32 per panel) cost a third of the
        # figure's time in the layout and the drawing, and mark no budget
        ax.minorticks_off()
        ax.set_ylim(0.48, 1.02)
        ax.axhline(0.5, color="0.8", linewidth=0.8, zorder=0)
        ax.set_title(task, fontsize="medium")
    for ax in axes[4:]:
        ax.set_xlabel("simulation budget")
    for ax in axes[::4]:
        ax.set_ylabel("C2ST")
    axes[0].legend(loc="upper right", fontsize="small")
    fig.suptitle("C2ST against the simulation budget: mean +- sd over the 10 observations, unless marked "
                 "(0.5 = indistinguishable from the reference posterior)", fontsize="medium")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    return buffer.getvalue()
