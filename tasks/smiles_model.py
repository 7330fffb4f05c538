"""The registered model of a molecule pool, as MLflow "models from code": this file is logged with the model and
builds it at load time from two artifacts — ``model.pt`` (the model's arrays as plain tensors, read with
``torch.load(weights_only=True)``) and ``train.json`` (its config) — so loading a shared model unpickles nothing.

Input: a DataFrame with a ``smiles`` column (whatever SMILES the user has).  Output: one row per input row, with
``smiles``, ``prediction`` (one column per target when several, ``prediction_<target>``), the class probabilities
``p_<class>`` for classification, and ``reason`` — None, or why the row has no prediction (empty, unparseable, too
large): a bad SMILES never fails the batch.  The numbers are those of ``tmdsub predict`` for the same molecules
(its intervals come from the predict stage's calibration on the audit sample).

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

        info = json.loads(open(context.artifacts["train_info"], encoding="utf-8").read())
        self.model = load_model(context.artifacts["model"], info)

    def predict(self, context, model_input, params=None):
        import numpy as np
        import pandas as pd

        from tasks.predict import smiles_outputs
        from tmdlib.datasets.smiles import smiles_reason
        from tmdlib.models.predict import probabilities

        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame({"smiles": list(model_input)})
        if "smiles" not in frame.columns:
            raise ValueError(f"the input needs a 'smiles' column; it has {list(frame.columns)}")
        raw = [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in frame["smiles"]]
        reasons = [smiles_reason(s) for s in raw]
        ok = [i for i, r in enumerate(reasons) if r is None]
        task = self.model.head.task
        Z = smiles_outputs(self.model, [raw[i].strip() for i in ok])
        out = pd.DataFrame({"smiles": raw})
        if task.is_regression:
            names = list(task.targets)
            for j, t in enumerate(names):
                col = np.full(len(raw), np.nan)
                col[ok] = Z[:, j]
                out["prediction" if len(names) == 1 else f"prediction_{t}"] = col
        else:
            values = (np.asarray(task.classes, dtype=float) if task.class_indices else np.array([0.0, 1.0]))
            P = probabilities(Z, task) if len(ok) else np.zeros((0, len(values)))
            pred = np.full(len(raw), np.nan)
            pred[ok] = values[P.argmax(axis=1)] if len(ok) else []
            out["prediction"] = pred
            for c, v in enumerate(values):
                col = np.full(len(raw), np.nan)
                col[ok] = P[:, c]
                out[f"p_{v:g}"] = col
        out["reason"] = reasons
        return out


mlflow.models.set_model(SmilesModel())
