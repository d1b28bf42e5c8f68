"""The theory model applied to one run directory: what the report's "Predicted" section shows.

Takes in a run directory (read through ``analysis.load_run``) and hands on per-arm predictions
to ``analysis.result`` and the report: :mod:`models` finds the run's models (lab truth.json,
config.json, a .gguf header or a preset), device and each arm's method; :mod:`setup` fixes the
bandwidth efficiency on the baseline arm (with the forward probe's pass curve when the run has
one); :mod:`arms` predicts each arm from its measured acceptance (and, with :mod:`counts`, from
what the drafter actually did); :mod:`text` is their text. The model itself is
:mod:`specbench.theory`, which reads no run directory::

    models.model_from_run(run_dir) -> RunModels | None
    arms.calibrate_from_run(run_dir, fit_arm=None) -> Efficiency
    arms.predict_arms(run_dir, fit_arm=None) -> list[ArmPrediction]
    arms.run_theory(run_dir, fit_arm=None) -> RunTheory;  text.format_arm_predictions(run_theory) -> str

Importing the package loads none of its modules: ``run.prepare`` reads the run's models through
:mod:`models` when a run starts, and must not pay for the analysis (pandas, SciPy) to do so.
"""

from __future__ import annotations
