"""Training batches: CollatedGraphs makes exactly what PyG's DataLoader collates, in the order it would draw."""
from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader

from tmdlib.torch.gin import CollatedGraphs, _epoch_order


def _graphs(n=23, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(0, 6))  # graphs with no node and no edge too
        src = rng.integers(0, max(k, 1), size=2 * k) if k else np.zeros(0, dtype=np.int64)
        dst = rng.integers(0, max(k, 1), size=2 * k) if k else np.zeros(0, dtype=np.int64)
        d = Data(x=torch.tensor(rng.normal(size=(k, 3)), dtype=torch.float32),
                 edge_index=torch.tensor(np.vstack([src, dst]), dtype=torch.long),
                 y=torch.tensor([[float(i), -float(i)]]), weight=torch.tensor([float(i % 4 + 1)]))
        d.num_nodes = k
        out.append(d)
    return out


def test_batches_equal_pyg_collation():
    data = _graphs()
    graphs = CollatedGraphs(data)
    for idx in ([0, 1, 2], [22, 3, 7, 7 - 7, 15], list(range(23))):
        x, ei, b, num, y, w = graphs.batch(idx)
        ref = Batch.from_data_list([data[i] for i in idx])
        assert torch.equal(x, ref.x) and torch.equal(ei, ref.edge_index) and torch.equal(b, ref.batch)
        assert num == ref.num_graphs and torch.equal(y, ref.y) and torch.equal(w, ref.weight)


def test_epoch_order_is_the_dataloader_order():
    data = _graphs(17)
    loader = DataLoader(data, batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(9))
    gen = torch.Generator().manual_seed(9)
    for _ in range(3):
        seen = [int(v) for batch in loader for v in batch.y[:, 0]]
        assert seen == _epoch_order(gen, len(data)).tolist()
