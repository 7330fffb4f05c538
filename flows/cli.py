"""The ``tmdsub`` command line."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

import flows  # noqa: F401  (environment defaults before prefect is imported)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Provable subsampling of graph datasets for GNN training (Tree Mover's Distance).")


def _fail(err: Exception) -> None:
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(2)


@app.command()
def ingest(
    dataset: Optional[str] = typer.Argument(None, help="Built-in dataset (MUTAG, PROTEINS, COX2, NCI1, DD, ogbg-molbace, ogbg-molbbbp)."),
    tu_dir: Optional[Path] = typer.Option(None, "--tu-dir", help="A folder in the TU raw layout (NAME_A.txt, ...)."),
    smiles_csv: Optional[Path] = typer.Option(None, "--smiles-csv", help="A CSV with a SMILES column (and optional label column)."),
    parquet: Optional[Path] = typer.Option(None, "--parquet", help="A Parquet file already in the graph-store schema."),
    name: Optional[str] = typer.Option(None, "--name", help="Dataset name for user data (letters, digits, _ . -)."),
    raw_root: Path = typer.Option(Path("data/raw"), "--raw-root", help="Folder with the shipped raw datasets."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output Parquet (default data/graphs/<NAME>.parquet)."),
    features: str = typer.Option("onehot", "--features", help="TU node features: 'onehot' (one-hot of node labels, PyG's default) or 'onehot+attributes' (append the node attributes)."),
    smiles_column: str = typer.Option("smiles", help="SMILES CSV: the SMILES column."),
    label_column: Optional[str] = typer.Option(None, help="SMILES CSV: the label column, if any."),
) -> None:
    """Ingest a dataset into the Parquet graph store (one row per graph)."""
    from tmdlib.errors import InputError
    from flows.ingest import ingest_flow, resolve_source

    try:
        if features not in ("onehot", "onehot+attributes"):
            raise InputError(None, f"--features must be 'onehot' or 'onehot+attributes', got {features!r}")
        node_attributes = features == "onehot+attributes"
        kind, path, ds_name, folder = resolve_source(
            dataset, str(raw_root), *(str(p) if p else None for p in (tu_dir, smiles_csv, parquet)), name)
        target = out or Path("data/graphs") / f"{ds_name}.parquet"
        summary = ingest_flow(kind, path, ds_name, str(target), raw_root=str(raw_root), checksum_folder=folder,
                              node_attributes=node_attributes, smiles_column=smiles_column,
                              label_column=label_column)
    except InputError as err:
        _fail(err)
    typer.echo(f"{ds_name}: {summary['graphs']} graphs, {summary['mean_nodes']:.2f} nodes and "
               f"{summary['mean_edges']:.2f} edges per graph -> {summary['path']}")


@app.command()
def tmd(
    dataset: str = typer.Argument(..., help="Dataset name (reads data/graphs/<DATASET>.parquet unless --graphs)."),
    pairs: Path = typer.Option(..., "--pairs", help="CSV with columns i,j (graph ids)."),
    out: Path = typer.Option(..., "--out", help="Output CSV with columns i,j,tmd."),
    depth: int = typer.Option(4, "--depth", help="Computation-tree depth L >= 1."),
    weights: str = typer.Option("pascal", "--weights", help="pascal | a number | comma list of L-1 numbers."),
    graphs: Optional[Path] = typer.Option(None, "--graphs", help="Graph-store Parquet (default data/graphs/<DATASET>.parquet)."),
) -> None:
    """Tree Mover's Distance of listed graph pairs."""
    from tmdlib.errors import InputError
    from tmdlib.weights import parse_weights, resolve_weights
    from tmdlib.datasets import check_dataset_name
    from flows.tmd import tmd_pairs_flow

    try:
        check_dataset_name(dataset)
        try:
            w = parse_weights(weights)
            resolve_weights(depth, w)
        except ValueError as err:
            raise InputError(None, f"--depth/--weights: {err}") from None
        store = graphs or Path("data/graphs") / f"{dataset}.parquet"
        n = tmd_pairs_flow(str(store), str(pairs), str(out), depth=depth, weights=w)
    except InputError as err:
        _fail(err)
    typer.echo(f"{n} pairs -> {out}")


def main() -> None:
    """Console-script entry point."""
    app(prog_name="tmdsub")


if __name__ == "__main__":
    sys.exit(main())
