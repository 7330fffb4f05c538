"""Write graphs of a graph-store table back in the TU text layout (test helper for appended batches)."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tu_folder(table, folder: Path, name: str) -> Path:
    """``folder/NAME_{A,graph_indicator,graph_labels,node_labels}.txt`` for the rows of ``table``."""
    folder.mkdir(parents=True, exist_ok=True)
    edges, indicator, node_labels, offset = [], [], [], 0
    for g, row in enumerate(table.to_pylist()):
        n = row["num_nodes"]
        indicator += [g + 1] * n
        node_labels += row["node_labels"]
        edges += [(offset + s + 1, offset + t + 1) for s, t in zip(row["edge_src"], row["edge_dst"])]
        offset += n
    (folder / f"{name}_A.txt").write_text("".join(f"{s}, {t}\n" for s, t in edges))
    (folder / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (folder / f"{name}_graph_labels.txt").write_text("".join(f"{y}\n" for y in table.column("y_raw").to_pylist()))
    (folder / f"{name}_node_labels.txt").write_text("".join(f"{v}\n" for v in np.asarray(node_labels)))
    return folder
