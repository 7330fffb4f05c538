r"""The GIN and the certified GIN as registered models (:mod:`tmdlib.models._registry`).

:class:`GINModel` trains through the one recipe (:func:`tmdlib.torch.fit.fit` → :func:`tmdlib.torch.fit.train_on`),
predicts through :func:`tmdlib.torch.fit.predict`, reports its stability constant :math:`c` (Theorem 8 with the
loss's :math:`M`) as its certificate, and saves its weights as plain tensors (a state dict that loads with
``torch.load(weights_only=True)``).

Named training settings (:data:`RECIPES`):

* ``paper-b2`` — the paper's Appendix B.2: Adam lr 0.01, 100 epochs, hidden 128 / batch 16 (TU), 256 / 64 (OGB),
  3 layers, sum readout, no biases.  Kept to reproduce the paper's tables.
* ``default`` — the pipeline's and the benchmarks' setting, chosen by measurement (``benchmarks/gin_recipe.py``,
  BENCHMARKS.md): the B.2 architecture with Adam lr 0.001 and batches of 64.
"""
from __future__ import annotations

import numpy as np

from ..models._base import ALL_TASKS, Inputs, Model, _check_fit_inputs
from ..models._registry import ModelSpec

__all__ = ["GINModel", "RECIPES", "recipe_config", "GIN", "CERTIFIED_GIN"]

#: Named training settings (architecture and optimiser); ``epochs`` / ``seed`` / ``device`` are set per run.
RECIPES = {
    "paper-b2": {"hidden": 128, "layers": 3, "pool": "add", "eta": 1.0, "bias": False, "lr": 0.01, "batch_size": 16,
                 "epochs": 100},
    "default": {"hidden": 128, "layers": 3, "pool": "add", "eta": 1.0, "bias": False, "lr": 0.001, "batch_size": 64,
                "epochs": 100},
}
TRAIN_KEYS = ("hidden", "layers", "pool", "eta", "bias", "lr", "batch_size", "epochs", "seed", "device")


def recipe_config(recipe: str = "default", dataset: str = "", **overrides) -> dict:
    """The training config of a named recipe (``paper-b2`` takes the OGB widths on ``ogbg-*`` sets), with
    ``overrides`` (``None`` values ignored)."""
    if recipe not in RECIPES:
        raise ValueError(f"unknown training recipe {recipe!r}: {', '.join(RECIPES)}")
    cfg = dict(RECIPES[recipe], seed=0, device="cpu")
    if recipe == "paper-b2" and dataset.lower().startswith("ogbg"):
        cfg.update(hidden=256, batch_size=64)
    cfg.update({k: v for k, v in overrides.items() if v is not None})
    return cfg


class GINModel(Model):
    r"""The paper's GIN (``certified=False``) or its Lipschitz-budgeted variant (``lipschitz_budget`` set).

    Parameters
    ----------
    recipe : str
        :data:`RECIPES` key the config starts from.
    lipschitz_budget, lipschitz_mode
        Certified training (:mod:`tmdlib.torch.certified`): ``orthogonal`` mode with budget ``c`` (MaxMin GIN,
        orthonormal matrices) or ``ball`` (per-matrix spectral budget).  None: the ordinary GIN.
    loss : str or None
        The task's default when None (:func:`tmdlib.guarantees.losses.default_loss`).
    huber_delta : float
    weights
        TMD level weights the constant :math:`c` is stated for.
    dataset : str
        Dataset name (``paper-b2``'s OGB widths).
    **train
        :class:`tmdlib.torch.gin.TrainConfig` fields overriding the recipe (``epochs``, ``lr``, ``seed``,
        ``device``, ...).
    """

    name = "gin"
    inputs = "graphs"
    tasks = ALL_TASKS

    def __init__(self, recipe: str = "default", lipschitz_budget=None, lipschitz_mode=None, loss=None,
                 huber_delta: float = 1.0, weights="pascal", dataset: str = "", on_loss=None, on_epoch=None,
                 **train):
        unknown = set(train) - set(TRAIN_KEYS)
        if unknown:
            raise ValueError(f"unknown GIN options {sorted(unknown)} (known: {', '.join(TRAIN_KEYS)})")
        self.cfg = recipe_config(recipe, dataset, **train)
        self.recipe = recipe
        if lipschitz_budget not in (None, 0, 0.0):
            self.cfg["lipschitz_budget"] = lipschitz_budget
            if lipschitz_mode == "orthogonal":
                self.cfg["lipschitz_mode"] = "orthogonal"
            self.name = "certified-gin"
        self.loss, self.delta, self.weights = loss, float(huber_delta), weights
        self.on_loss, self.on_epoch = on_loss, on_epoch
        self.model = None
        self.result = None

    def fit(self, X: Inputs, y, sample_weight=None, task=None):
        from ..datasets._task import BINARY
        from .fit import fit

        pos = np.arange(len(X.dataset)) if X.positions is None else X.positions
        w = _check_fit_inputs(y, sample_weight, len(pos))
        self.result = fit(X.dataset, pos, y, w, self.cfg, task or BINARY, loss=self.loss, delta=self.delta,
                          node_subsets=X.node_subsets, weights=self.weights, on_loss=self.on_loss,
                          on_epoch=self.on_epoch)
        self.model, self.head = self.result.model.eval(), self.result.head
        return self

    def outputs(self, X: Inputs, batch_size: int = 256) -> np.ndarray:
        from .fit import predict
        from .pyg import dataset_to_pyg

        pos = np.arange(len(X.dataset)) if X.positions is None else X.positions
        out = [np.zeros((0, self.head.task.output_dim))]
        step = 8192  # graphs converted at a time (large pools stream through)
        for a in range(0, len(pos), step):
            subsets = None if X.node_subsets is None else X.node_subsets[a:a + step]
            data = dataset_to_pyg(X.dataset, positions=pos[a:a + step], node_subsets=subsets)
            out.append(predict(self.model, data, self.head, device=self.cfg.get("device", "cpu")))
        return np.concatenate(out)

    def certificate(self) -> dict | None:
        return self.result.lipschitz if self.result is not None else getattr(self, "_lipschitz", None)

    def describe(self) -> dict:
        from .gin import model_config

        return {"recipe": self.recipe, "config": self.cfg,
                "model": model_config(self.model) if self.model is not None else None}

    def state(self) -> tuple[dict, dict]:
        from .gin import model_config

        arrays = {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()}
        config = {"name": self.name, "recipe": self.recipe, "config": self.cfg, "model": model_config(self.model),
                  "lipschitz": self.certificate(), **self._head_config()}
        return config, arrays

    @classmethod
    def from_state(cls, config: dict, arrays: dict) -> "GINModel":
        import torch

        from .gin import build_model

        m = cls.__new__(cls)
        m.cfg, m.recipe, m.name = dict(config.get("config") or {}), config.get("recipe", "default"), config["name"]
        m.loss, m.delta, m.weights, m.on_loss, m.on_epoch = None, 1.0, "pascal", None, None
        m.model = build_model(config["model"])
        m.model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in arrays.items()})
        m.model.eval()
        m.result = None
        m._lipschitz = config.get("lipschitz")
        m._restore_head(config)
        return m


def _make(options: dict) -> GINModel:
    return GINModel(**options)


#: The registered models (:data:`tmdlib.models._registry.ENTRY_POINTS`): the GIN and the certified GIN.
GIN = ModelSpec("gin", make=_make, restore=GINModel.from_state, inputs="graphs", lipschitz=True, seeded=True,
                summary="the paper's GIN (3 layers, sum readout, no biases), trained by the default recipe",
                title="GIN", defaults={"recipe": "default"}, quick={"epochs": 2, "hidden": 8}, auto_recipe="default")
CERTIFIED_GIN = ModelSpec("certified-gin", make=_make, restore=GINModel.from_state, inputs="graphs", lipschitz=True,
                          seeded=True, title="certified GIN",
                          summary="the GIN trained within a Lipschitz budget (orthonormal MaxMin GIN, c = 0.002): "
                                  "an informative certificate c*eps",
                          defaults={"recipe": "default", "lipschitz_budget": 0.002, "lipschitz_mode": "orthogonal"},
                          quick={"epochs": 2, "hidden": 8}, auto_recipe="paper-b2", certified=True)
