"""The built-in models, registered once when :mod:`tmdlib.models` is imported (built lazily: no torch or RDKit
import until a model is made or restored)."""
from __future__ import annotations

from .registry import ModelSpec, register


def _gin(options):
    from ..torch.model import GINModel

    return GINModel(**options)


def _gin_restore(config, arrays):
    from ..torch.model import GINModel

    return GINModel.from_state(config, arrays)


def _estimator(kind: str):
    def make(options):
        from .base import EstimatorModel

        def build(task):
            from ..chem import models as chem

            regression = task.is_regression
            if kind == "svm":
                return (chem.TanimotoSVR if regression else chem.TanimotoSVC)(**options)
            cls = chem.ECFPForest if kind == "rf" else chem.ECFPBoosting
            return cls(task="regression" if regression else "classification", **options)

        return EstimatorModel(build, name=kind)

    return make


def _estimator_restore(config, arrays):
    from .base import EstimatorModel

    return EstimatorModel.from_state(config, arrays)


register(ModelSpec("gin", make=_gin, restore=_gin_restore, inputs="graphs", lipschitz=True,
                   summary="the paper's GIN (3 layers, sum readout, no biases), trained by the default recipe",
                   defaults={"recipe": "default"}))
register(ModelSpec("certified-gin", make=_gin, restore=_gin_restore, inputs="graphs", lipschitz=True,
                   summary="the GIN trained within a Lipschitz budget (orthonormal MaxMin GIN, c = 0.002): an "
                           "informative certificate c*eps",
                   defaults={"recipe": "default", "lipschitz_budget": 0.002, "lipschitz_mode": "orthogonal"}))
for _kind, _summary in (("rf", "random forest on ECFP4 counts (500 trees)"),
                        ("svm", "support vector machine, Tanimoto (MinMax) kernel on ECFP4 counts"),
                        ("gbm", "gradient boosting on ECFP4 counts")):
    register(ModelSpec(_kind, make=_estimator(_kind), restore=_estimator_restore, inputs="molecules",
                       tasks=("binary", "multiclass", "regression"), summary=_summary))


def _chemprop(options):
    from ..torch.chemprop import ChempropModel

    return ChempropModel(**options)


def _chemprop_restore(config, arrays):
    from ..torch.chemprop import ChempropModel

    return ChempropModel.from_state(config, arrays)


register(ModelSpec("chemprop", make=_chemprop, restore=_chemprop_restore, inputs="molecules", tasks=("regression",),
                   summary="chemprop's D-MPNN (the chemprop package: its featuriser, trainer, target scaling)"))
