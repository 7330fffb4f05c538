r"""DosCond: condensing a graph dataset by one-step gradient matching (Jin et al., KDD 2022).

Implemented from the paper (Algorithm 1 and Section 3 of "Condensing Graphs via One-Step Gradient
Matching"), with the GIN of paper B.2 as the network whose gradients are matched.

**Sizing for a budget of k graphs.**  ``k`` synthetic graphs in total (the same ``k`` a selection
method keeps), split across classes in proportion to the class sizes of the training graphs
(:func:`~tmdlib.torch.condense._common.class_budget`, scheme ``"proportional"``: every class but the
largest gets :math:`\max(1, \lfloor n_c k / n\rfloor)`, the largest the rest).  Every synthetic graph
has :math:`N = \mathrm{round}(\bar n)` nodes, :math:`\bar n` the mean node count of the training
graphs (DosCond's choice).  Parameters: features :math:`X_i \in \mathbb R^{N\times d}` and edge logits
:math:`\Omega_i \in \mathbb R^{N\times N}` per synthetic graph.

**Initialisation.**  With labels: the synthetic graphs of class ``c`` start as real training graphs of
class ``c`` drawn at random (truncated / zero-padded to ``N`` nodes), :math:`\Omega = 10A - 5`.  Without
labels (the paper's label-free variant): ``k`` training graphs drawn at random regardless of class.

**Objective (one step).**  At every step a fresh GIN :math:`h_\theta` is drawn at its random
initialisation (never trained: the "one step" of the title), a relaxed structure :math:`\tilde A` is
sampled (binary concrete, :mod:`~tmdlib.torch.condense._common`), and

.. math:: \mathcal L = \sum_{c} D\big(\nabla_\theta \ell(h_\theta; \mathcal S_c),\;
          \nabla_\theta \ell(h_\theta; \mathcal B_c)\big)
          + \beta\,\mathrm{ReLU}\big(\overline{\sigma(\Omega)} - \rho_0\big),
   \qquad D(g, g') = \frac{\lVert g - g'\rVert_2^2}{\lVert g'\rVert_2^2},

with :math:`\mathcal B_c` a batch of up to ``batch_real`` real training graphs of class ``c``,
:math:`\mathcal S_c` the synthetic graphs of class ``c`` (run through
:func:`~tmdlib.torch.condense._common.dense_gin_forward` on :math:`(X, \tilde A)`), :math:`\ell` the mean
BCE-with-logits against ``c``, :math:`D` the normalised squared distance of the concatenated gradients
(the ``mse`` matching distance of the authors' graph-classification runs), and the sparsity penalty
keeping the mean edge probability below the density :math:`\rho_0` of the initial graphs.  Adam on
:math:`X` (``lr_feat``) and :math:`\Omega` (``lr_adj``).  :math:`D` is 0 when the synthetic graphs of a
class are the real batch itself (same features, same discrete structure): a property the tests check.

**Without labels.**  The loss terms that read a label are dropped: the class split (one group: all real
graphs against all synthetic graphs) and, inside the binary cross-entropy
:math:`\ell(z, y) = \mathrm{softplus}(z) - yz`, the term :math:`-yz`.  What remains is the
label-free matching of :math:`\nabla_\theta\, \overline{\mathrm{softplus}(h_\theta(G))}` between real
and synthetic graphs, plus the sparsity penalty; initialisation is class-agnostic (above).  The
synthetic graphs carry no label; the caller attaches the label of each graph's source graph.

**What the GIN is trained on.**  The discrete graphs :math:`A = [\sigma((\Omega+\Omega^\top)/2) > 1/2]`
(no self-loops) with the learned features :math:`X`, all ``N`` nodes, weight 1 each: the ordinary sparse
message passing of :class:`~tmdlib.torch.gin.GIN`, nothing dense or weighted.

**Labels.**  The labelled variant reads the training labels (every real graph's, to group the batches
and in the loss) -- unlike every selection method of tmdsub, which never reads labels to choose.

Differences from the paper's runs: a budget of ``k`` graphs instead of graphs-per-class; the GIN of B.2
(3 layers, sum aggregation, no bias, add pooling, one logit + BCE) instead of the authors' GCN; fewer
condensation steps by default (``steps``; the authors run 1000) to fit a CPU.
"""
from __future__ import annotations

import time

import numpy as np
import torch
from torch.nn import functional as F
from torch_geometric.data import Batch

from ..._graph import GraphDataset
from ..gin import GIN
from ..pyg import dataset_to_pyg
from ._common import (Condensed, check_budget, dense_from_graphs, dense_gin_forward, discrete_structure, gin_fields,
                     pick_sources, relaxed_structure, resolve_options, synthetic_nodes, temperature, to_data,
                     without_labels)

__all__ = ["doscond", "matching_distance", "group_loss", "DEFAULTS"]

#: Hyper-parameters (DosCond's graph-classification defaults where they apply; ``steps`` reduced).
DEFAULTS = {"steps": 200, "lr_feat": 0.01, "lr_adj": 0.1, "beta": 0.1, "batch_real": 256,
            "node_multiplier": 1.0, "t_start": 1.0, "t_end": 0.01, "anneal_steps": 200}


def matching_distance(g_syn, g_real) -> torch.Tensor:
    r""":math:`D(g, g') = \lVert g - g'\rVert^2 / \lVert g'\rVert^2` over the concatenated gradients."""
    gs = torch.cat([g.reshape(-1) for g in g_syn])
    gr = torch.cat([g.reshape(-1) for g in g_real])
    return ((gs - gr) ** 2).sum() / (gr ** 2).sum().clamp_min(1e-20)


def group_loss(logits: torch.Tensor, target: int | None) -> torch.Tensor:
    """Mean BCE-with-logits against ``target`` (0/1), or the label-free part mean softplus when ``None``."""
    z = logits.reshape(-1)
    if target is None:
        return F.softplus(z).mean()
    return F.binary_cross_entropy_with_logits(z, torch.full_like(z, float(target)))


def doscond(ds: GraphDataset, k: int, labels=None, seed: int = 0, gin: dict | None = None, **options) -> Condensed:
    """Condense the training graphs ``ds`` into ``k`` synthetic graphs (module docstring).

    Parameters
    ----------
    ds : GraphDataset
        The training graphs (``ds.y`` is never read: labels come only through ``labels``).
    k : int
        Number of synthetic graphs, ``1 <= k <= len(ds)``.
    labels : array_like of {0, 1}, shape (len(ds),), or None
        Training labels (labelled variant) or ``None`` (label-free variant).
    seed : int
        Seeds the initial picks, the relaxation noise, the real batches and every network draw; the
        result repeats bit for bit on CPU with the same torch thread count.
    gin : dict, optional
        GIN fields (``hidden``, ``layers``, ``pool``, ``eta``, ``bias``; other keys ignored), as in
        :func:`tmdlib.experiment.protocol.arch_config`.
    **options
        Overrides of :data:`DEFAULTS`.

    Returns
    -------
    Condensed
    """
    o = resolve_options("DosCond", DEFAULTS, options)
    t0 = time.process_time()
    ds = without_labels(ds)
    y = check_budget(ds, k, labels)
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    N = synthetic_nodes(ds, o["node_multiplier"])
    source, classes = pick_sources(len(ds), int(k), y, "proportional", rng)
    X0, A0 = dense_from_graphs(ds, source, N)
    feat = X0.clone().requires_grad_(True)
    omega = (10.0 * A0 - 5.0).requires_grad_(True)
    density = float(A0.mean())
    opt_feat = torch.optim.Adam([feat], lr=o["lr_feat"])
    opt_adj = torch.optim.Adam([omega], lr=o["lr_adj"])
    real = dataset_to_pyg(ds)
    if y is None:
        groups = [(None, np.arange(len(ds)), np.arange(int(k)))]
    else:
        groups = [(int(c), np.flatnonzero(y == c), np.flatnonzero(classes == c)) for c in np.unique(classes)]
    g = gin_fields(gin)
    losses = []
    for step in range(int(o["steps"])):
        model = GIN(ds.num_features, g["hidden"], g["layers"], 1, g["pool"], g["eta"], g["bias"])
        params = list(model.parameters())
        adj = relaxed_structure(omega, temperature(step, o["t_start"], o["t_end"], o["anneal_steps"]), gen)
        loss = torch.zeros(())
        for target, real_pos, syn_pos in groups:
            pick = rng.choice(real_pos, size=min(int(o["batch_real"]), len(real_pos)), replace=False)
            batch = Batch.from_data_list([real[int(i)] for i in pick])
            out_r = model(batch.x, batch.edge_index, batch.batch, batch.num_graphs)
            g_real = [t.detach() for t in torch.autograd.grad(group_loss(out_r, target), params)]
            sl = torch.as_tensor(syn_pos)
            out_s = dense_gin_forward(model, feat[sl], adj[sl])
            g_syn = torch.autograd.grad(group_loss(out_s, target), params, create_graph=True)
            loss = loss + matching_distance(g_syn, g_real)
        reg = o["beta"] * F.relu(torch.sigmoid(omega).mean() - density)
        opt_feat.zero_grad()
        opt_adj.zero_grad()
        (loss + reg).backward()
        opt_feat.step()
        opt_adj.step()
        with torch.no_grad():
            omega.clamp_(-10.0, 10.0)
        losses.append(float(loss.detach()))
    with torch.no_grad():
        graphs = to_data(feat.detach(), discrete_structure(omega.detach()), classes)
    return Condensed(graphs=graphs, source=source, seconds=time.process_time() - t0, method="doscond",
                     uses_labels=y is not None, num_nodes=N, losses=losses)
