"""The registered model of a molecule pool, as MLflow "models from code": this file is logged with the model and
builds it at load time from two artifacts — ``model.pt`` (the model's arrays as plain tensors, read with
``torch.load(weights_only=True)``) and ``train.json`` (its config) — so loading a shared model unpickles nothing.

Input: a DataFrame with a ``smiles`` column (whatever SMILES the user has).  Output: one row per input row with the
columns of ``tmdsub predict --smiles-csv`` but its ``line``: ``smiles``, ``prediction`` (``prediction_<target>`` when
several), ``lower`` / ``upper`` (regression) or ``p_<class>`` and ``prediction_set`` (classification),
``nn_similarity`` and ``in_domain`` (the applicability domain, :mod:`tmdlib.chem.domain`), and ``reason`` — None,
or why the row has no prediction (empty, unparseable, too large): a bad SMILES never fails the batch.  A third
artifact, ``domain`` (:func:`tasks.train.domain_artifact`: the trained molecules, the calibration members' SMILES and
labels), lets it calibrate at load time exactly as the predict stage does (at ``predict.confidence``'s default 0.9),
so the numbers are those of ``tmdsub predict`` for the same molecules.  A model logged without it gives predictions
without intervals or domain.  What the predictions are in (``labels.name``: ``pIC50``, ...) is the logged model's
metadata ``property`` and the registered version's tag ``property``.

Needs tmdsub (tmdlib, tasks) importable where it is loaded.
"""
from __future__ import annotations

import mlflow
from mlflow.pyfunc import PythonModel


class SmilesModel(PythonModel):
    """Predictions for SMILES from a trained tmdsub model (any registered model: a molecule model reads the SMILES,
    a graph model their graphs)."""

    def load_context(self, context):
        import json

        from tasks.train import load_model
        from tmdlib.chem.domain import calibrate_with_domain
        from tmdlib.models.predict import calibrate, smiles_outputs

        info = json.loads(open(context.artifacts["train_info"], encoding="utf-8").read())
        self.model = load_model(context.artifacts["model"], info)
        task = self.model.head.task
        self.domain = None
        if "domain" not in context.artifacts:
            self.cal = calibrate([], [], task)
            return
        dom = json.loads(open(context.artifacts["domain"], encoding="utf-8").read())
        cal_smiles = dom["calibration_smiles"]
        self.cal, self.domain = calibrate_with_domain(
            dom["train_smiles"], smiles_outputs(self.model, cal_smiles), cal_smiles,
            dom["calibration_labels"], task, dom["confidence"])

    def predict(self, context, model_input, params=None):
        import numpy as np
        import pandas as pd

        from tmdlib.datasets._smiles import smiles_reason
        from tmdlib.models.predict import rows_columns

        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame({"smiles": list(model_input)})
        if "smiles" not in frame.columns:
            raise ValueError(f"the input needs a 'smiles' column; it has {list(frame.columns)}")
        raw = [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in frame["smiles"]]
        reasons = [smiles_reason(s) for s in raw]
        out = pd.DataFrame({"smiles": raw})
        for k, v in rows_columns(self.model, self.cal, self.domain, raw, reasons).items():
            out[k] = pd.Series(v, dtype=float if k.startswith(("prediction", "lower", "upper", "p_", "nn_"))
                               and k != "prediction_set" else object)
        out["reason"] = reasons
        return out


mlflow.models.set_model(SmilesModel())
