"""The GIN's training options as the train stage checks them: the recipe with the user's options over it, the
certified mode's budget (or the budget a target certificate asks for), and the keywords of
:class:`tmdlib.torch.model.GINModel`.

Importing this module imports no torch (:mod:`tmdlib.torch.certified` is imported inside the functions): the train
stage's config checks its options with it before anything heavy is loaded.
"""
from __future__ import annotations

from .._errors import InputError
from ..models.policy import parse_target

__all__ = ["resolve_config", "target_budget", "gin_options"]


def _problems(cfg: dict) -> list[str]:
    """What is wrong with the recipe-filled options ``cfg`` (one line per option, the option named as typed)."""
    pool, device = cfg["pool"], cfg["device"]
    problems = [f"--{k.replace('_', '-')} must be >= 1" for k in ("hidden", "layers", "batch_size") if cfg[k] < 1]
    if cfg["epochs"] < 0:
        problems.append("--epochs must be >= 0")
    if not cfg["lr"] > 0:
        problems.append("--lr must be > 0")
    if not cfg["eta"] > 0:
        problems.append("--eta must be > 0")
    if pool not in ("add", "mean"):
        problems.append("--pool must be 'add' or 'mean'")
    if device != "auto" and not (device == "cpu" or device.startswith("cuda")):
        problems.append("--device must be auto, cpu or cuda[:N]")
    return problems


def _certified_problems(cfg: dict, budget, mode: str) -> list[str]:
    """Add the certified mode's ``budget`` (and ``mode`` when ``"orthogonal"``) to ``cfg``; what is wrong with it.

    The TMD stability bound needs :math:`\\phi(0) = 0` (no bias) and a sum readout; the orthogonal (MaxMin) GIN
    takes one budget, the constant c itself, and an even width; the ball takes one budget or one per weight matrix
    (:math:`2L + 1` for :math:`L` layers)."""
    problems = []
    cfg["lipschitz_budget"] = budget
    if mode == "orthogonal":
        cfg["lipschitz_mode"] = mode
        if isinstance(budget, list):
            problems.append("--lipschitz-mode orthogonal takes one budget (the constant c), not a list")
        if cfg["hidden"] % 2:
            problems.append("--lipschitz-mode orthogonal needs an even --hidden (MaxMin pairs units)")
    if isinstance(budget, list) and len(budget) != 2 * cfg["layers"] + 1 and mode == "ball":
        problems.append(f"--lipschitz-budget: {len(budget)} per-matrix budgets for {2 * cfg['layers'] + 1} "
                        "weight matrices (2 per GIN layer + readout)")
    if cfg["bias"]:
        problems.append("--lipschitz-budget needs --no-bias (phi(0) = 0 for the TMD stability bound)")
    if cfg["pool"] != "add":
        problems.append("--lipschitz-budget needs --pool add (sum readout for the TMD stability bound)")
    return problems


def resolve_config(dataset: str, opts, lipschitz_budget=None, lipschitz_mode=None, recipe: str = "paper-b2") -> dict:
    """The GIN's training hyper-parameters, checked.

    Parameters
    ----------
    dataset : str
        The dataset's name (``paper-b2`` fills in the paper's per-dataset B.2 widths).
    opts : object
        The stage's options, anything with ``epochs``, ``hidden``, ``layers``, ``batch_size``, ``lr``, ``seed``,
        ``device``, ``pool``, ``eta``, ``bias`` (a None width / batch / lr: the recipe's).
    lipschitz_budget : float, str, list or None
        Certified mode (:mod:`tmdlib.torch.certified`): a positive number (per weight matrix) or a comma list of
        per-matrix budgets; ``None``, ``0``, ``"none"``, ``"null"``: unconstrained.  Added to the config only when
        set, so unconstrained configs are unchanged.
    lipschitz_mode : str or None
        ``"ball"`` (the default) or ``"orthogonal"`` (MaxMin GIN with orthonormal matrices, the budget is c itself);
        added only when ``"orthogonal"`` and a budget is set.
    recipe : str
        A name of :data:`tmdlib.torch.model.RECIPES`.

    Returns
    -------
    dict
        ``hidden``, ``layers``, ``pool``, ``eta``, ``bias``, ``lr``, ``batch_size``, ``epochs``, ``seed``,
        ``device`` (and ``lipschitz_budget`` / ``lipschitz_mode`` in certified mode).

    Raises
    ------
    InputError
        Every problem found, on one line.
    """
    from .certified import parse_budget, parse_mode
    from .model import RECIPES, recipe_config

    if recipe not in RECIPES:
        raise InputError(None, f"--recipe must be one of {', '.join(RECIPES)}, got {recipe!r}")
    d = recipe_config(recipe, dataset)
    cfg = {"hidden": int(opts.hidden or d["hidden"]), "layers": int(opts.layers), "pool": opts.pool,
           "eta": float(opts.eta), "bias": bool(opts.bias), "lr": float(opts.lr or d["lr"]),
           "batch_size": int(opts.batch_size or d["batch_size"]), "epochs": int(opts.epochs), "seed": int(opts.seed),
           "device": opts.device}
    problems = _problems(cfg)
    try:
        budget = parse_budget(lipschitz_budget)
    except ValueError as err:
        problems.append(f"--lipschitz-budget: {err}")
        budget = None
    try:
        mode = parse_mode(lipschitz_mode)
    except ValueError as err:
        problems.append(f"--lipschitz-mode: {err}")
        mode = "ball"
    if budget is not None:
        problems += _certified_problems(cfg, budget, mode)
    if problems:
        raise InputError(None, "; ".join(problems))
    return cfg


def target_budget(target, epsilon, selection: str, layers: int, eta: float, weights, mode) -> float | None:
    """The budget that makes the certificate :math:`c\\varepsilon` equal ``target`` nats for a selection whose
    medoid objective (mean) is :math:`\\varepsilon`.

    Returns
    -------
    float or None
        None when ``target`` is unset / 0; ``"orthogonal"`` mode: :math:`c = {\\rm target}/\\varepsilon`; ``"ball"``:
        the per-matrix :math:`\\beta` with :math:`\\beta^{2L+1}\\kappa = {\\rm target}/\\varepsilon`
        (:func:`tmdlib.torch.certified.budget_for_target`, :math:`L` = ``layers``).

    Raises
    ------
    InputError
        A negative / non-numeric target, or a selection (named ``selection``) without :math:`\\varepsilon`.
    """
    from .certified import budget_for_target, parse_mode

    t = parse_target(target)
    if t is None:
        return None
    if epsilon is None or not float(epsilon) > 0:
        raise InputError(selection, "--lipschitz-target needs the selection's epsilon_mean (a TMD medoid objective); "
                                    "this selection has none: set --lipschitz-budget instead")
    c = t / float(epsilon)
    return c if parse_mode(mode) == "orthogonal" else budget_for_target(layers, c, eta, weights)


def gin_options(cfg: dict, loss: str, huber_delta: float, weights, dataset: str, recipe: str, on_loss=None) -> dict:
    """The keywords of :class:`tmdlib.torch.model.GINModel` from a checked :func:`resolve_config` ``cfg``: the
    loss (``"auto"``: the task's, None), Huber's δ, the TMD level ``weights`` c is stated for, and ``on_loss``
    (called with each epoch's loss)."""
    train = {k: cfg[k] for k in ("hidden", "layers", "pool", "eta", "bias", "lr", "batch_size", "epochs", "seed",
                                 "device")}
    return {"recipe": recipe, "dataset": dataset, "lipschitz_budget": cfg.get("lipschitz_budget"),
            "lipschitz_mode": cfg.get("lipschitz_mode"), "loss": None if loss == "auto" else loss,
            "huber_delta": huber_delta, "weights": weights, "on_loss": on_loss, **train}
