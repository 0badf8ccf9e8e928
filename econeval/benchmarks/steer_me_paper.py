"""The paper's experiment matrix as a suite (`--suite steer-me-paper`): each experiment STEER-ME
ran per element is a task of its own, its adaptation and CAR fixed, so one run holds them all and
`econeval report` sets them side by side.

The paper (its §4) ran 8 experiments per element for every model but o1-preview, 4 for it. It
does not list them; the only reading that gives 8 and 4 is its two 0-CoT adaptations (shown,
hidden) × CAR (without, with) × RPM's two mappings (renormalised, mixed), and for o1-preview, which
reasons and was asked for its letter directly with no hidden adaptation, direct × CAR × RPM. Each
task reports both mappings, so 4 tasks are a model's 8 experiments and 2 a reasoning model's 4.
Free text is the paper's further experiment (its §3.3.1, for o1-preview not run: its reasoning was
hidden). Which figure uses which task is in each task's description (`econeval list`) and in
docs/fidelity.md. The public `steer-me` task (`--adaptation`, `--car`) is unchanged.
"""

from __future__ import annotations

from .. import registry
from .steer_me import SteerMe

SUITE = "steer-me-paper"


class PaperExperiment(SteerMe):
    """One experiment of the paper: the adaptation and CAR are the experiment's, not options."""

    suite = SUITE
    in_all = False  # seven runs of every question: asked for by name
    options = tuple(o for o in SteerMe.options if o.name not in ("adaptation", "car"))

    def not_for(self, prep, reasoning):
        why = super().not_for(prep, reasoning)
        if why and prep.state["adaptation"] in ("cot-shown", "cot-hidden"):  # named in the suite's terms, not steer-me's flags
            return ("the paper ran no 0-CoT experiment for a model that reasons (o1-preview): it asked for the letter "
                    "directly (steer-me-paper-direct, -direct-car)")
        return why


def experiment(name: str, adaptation: str, car: bool, figures: str, reasoning_only: bool = False):
    """Register the experiment `steer-me-paper-NAME`."""
    label = {"cot-shown": "0-CoT shown", "cot-hidden": "0-CoT hidden", "free-text": "free text",
             "direct": "the letter asked directly"}[adaptation]
    base = (DirectExperiment,) if reasoning_only else (PaperExperiment,)
    cls = type(f"Paper_{name.replace('-', '_')}", base, {
        "name": f"{SUITE}-{name}", "fixed": {"adaptation": adaptation, "car": car},
        "description": f"STEER-ME paper: {label}, {'with' if car else 'without'} CAR — {figures}"})
    registry.task(cls)
    return cls


class DirectExperiment(PaperExperiment):
    """The paper's protocol for a model that reasons (o1-preview): its letter asked directly."""

    def not_for(self, prep, reasoning):
        if not reasoning.get("reasons"):
            return ("the paper asked only a model that reasons (o1-preview) for its letter directly; a model that does "
                    "not reason runs the 0-CoT experiments (steer-me-paper-shown, -hidden and their -car)")
        return super().not_for(prep, reasoning)


experiment("shown", "cot-shown", False, "every heatmap (Figs. 4, 5, 7, 9: the best configuration), Figs. 3, 8 and 11, "
           "the robustness of §5.6.2-3")
experiment("shown-car", "cot-shown", True, "Table 2, Fig. 12 and the NOTA drop of §5.3")
experiment("hidden", "cot-hidden", False, "the shown→hidden drop of §5.3-5.4 and Fig. 14's hidden bars")
experiment("hidden-car", "cot-hidden", True, "CAR with the options hidden while reasoning")
experiment("free", "free-text", False, "Fig. 10 and the mistake shares of §5.2, Figs. 14-15 (against hidden)")
experiment("direct", "direct", False, "a reasoning model's protocol (o1-preview: no 0-CoT turn, no hidden adaptation)",
           reasoning_only=True)
experiment("direct-car", "direct", True, "a reasoning model's protocol with CAR (o1-preview's Table 2 row)",
           reasoning_only=True)
