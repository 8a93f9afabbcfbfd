"""Whether a resumed checkpoint's validation losses were drawn as this version draws them.

Since 2026-12-06 (session 68, commit f986c22) each held-out pair draws its (t, z) from its own key; a checkpoint
saved by an earlier version holds losses of the same pairs on other draws, and its info records nothing that tells
(its config and info read as today's). Resumed as they were, its best loss was compared with this version's: a run
of session 64 resumed at step 20 kept a history ``[[20, 1.7861], [40, 1.5739]]`` whose first loss this version scores
1.6727, and a resume only to evaluate reported 1.7861 as its validation loss. So a checkpoint whose early-stopping
state does not name its draws (``validation.DRAWS``, saved since session 76) has its best weights scored again here,
once, on this run's draws: a loss other than the checkpoint's best says its losses do not compare, and early
stopping starts afresh from those best weights and that score (``drawn_otherwise``).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from gensbi_sharding.harness.console import EVERY_PROCESS

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from gensbi_sharding.harness.train import StepFunctions
    from gensbi_sharding.harness.validation import EarlyStopping

__all__ = ["DRAWS_TOLERANCE", "drawn_otherwise"]

log = logging.getLogger("gensbi_sharding")

#: Relative gap between the checkpoint's best loss and its weights scored again that counts as other draws. The same
#: draws on another mesh, rule or x64 setting differ by reduction order only (about 1e-6); other draws of the same
#: pairs by the draws' noise (the session-64 run above: 6%).
DRAWS_TOLERANCE = 1e-3


def drawn_otherwise(stopper: EarlyStopping, functions: StepFunctions, state: Any, val_batches: list[dict],
                    key: Any, step: int, *, draws: int, mesh: Mesh | None) -> EarlyStopping | None:
    """Score the restored best weights again; where the checkpoint's best loss is not theirs (a warning), the early
    stopping to continue instead: those best weights, of their step, with only their score on this run's draws.

    The best weights are kept, not dropped: an evaluation-only resume samples them (not the newest weights), and
    later validations compete with them on the same draws. The validations recorded after the best count toward
    patience as they did (an early-stopped run stays stopped), but for the restored step's, which is scored again
    (``validation.validate_pending``).

    Parameters
    ----------
    stopper : EarlyStopping
        The early stopping the checkpoint restored (nothing to check without a best).
    functions, state, val_batches, key
        The run's step functions, its restored state (of ``step``), held-out batches and base key.
    step : int
        The restored step.
    draws : int
        ``train.val_draws``.
    mesh : Mesh or None
        The run's mesh.

    Returns
    -------
    EarlyStopping or None
        None: the checkpoint's losses compare (``stopper`` continues, now naming its draws); else the early stopping
        that replaces its (an earlier version's draws).
    """
    from gensbi_sharding import mesh_context
    from gensbi_sharding.harness.validation import DRAWS, EarlyStopping, validation_loss

    if stopper.draws == DRAWS:  # saved by a version that draws as this one does: nothing to score again
        return None
    if not stopper.history:  # no loss to compare: every later one is this version's, and its saves say so
        stopper.draws = DRAWS
        return None
    if not (val_batches and stopper.kept_best_step() is not None):
        return None
    with mesh_context(mesh):
        loss = validation_loss(functions, stopper.with_best(functions, state, step), val_batches, key, draws=draws)
    if loss is None or math.isclose(loss, stopper.best_loss, rel_tol=DRAWS_TOLERANCE):
        stopper.draws = DRAWS  # the same draws: its later saves say so
        return None
    log.warning("early stopping starts afresh: the checkpoint's validation losses were drawn otherwise (its best "
                "weights, step %d, score %.4f on this version's draws, not the %.4f it recorded: a checkpoint of a "
                "version before 2026-12-06 drew each held-out pair's (t, z) otherwise), so they do not compare with "
                "this run's; its weights go on, and its best weights stay the best until one of this run's "
                "validations scores lower", stopper.best_step, loss, stopper.best_loss, extra=EVERY_PROCESS)
    since = sum(1 for at, _ in stopper.history if stopper.best_step < at < step)  # the restored step's: validated again
    return EarlyStopping(patience=stopper.patience, best_loss=loss, best_step=stopper.best_step,
                         best_weights=stopper.best_weights, since_best=since, history=[(stopper.best_step, loss)])
