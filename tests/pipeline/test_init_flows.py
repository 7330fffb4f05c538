"""Issue 70, as a new user: the wheel built from this checkout, installed into a fresh virtual environment outside it,
``tmdsub init`` in a temporary folder, an SD pool with compound ids (and one broken record) in data/raw/, ``dvc repro
label_requests@POOL``, the lab's answer keyed by compound id, ``dvc repro`` through the predictions.  Nothing is read
from the checkout by the pipeline, nothing is written to it or into the installed package.

The fresh environment gets its heavy dependencies (torch, RDKit, Prefect, DVC, MLflow) from the environment running
the tests through a ``.pth`` file holding that environment's site-packages: a plain path there is added after the
fresh environment's own site-packages and does not run that folder's ``.pth`` files, so the editable install of the
checkout is not activated and ``flows``, ``tasks`` and ``tmdlib`` come from the wheel (checked)."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from helpers import RAW, ROOT

N = 80  # molecules in the pool (one more, broken, is skipped and listed)
pytestmark = pytest.mark.skipif(not (RAW / "MoleculeACE").is_dir(), reason="data/raw not present")


def _sh(args, cwd, env, timeout=1200):
    res = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{args}: {res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res


def _checkout_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def _wheel(tmp: Path) -> Path:
    """The wheel of the checkout's working tree, built from a copy (a build in place writes build/ into it)."""
    src = tmp / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", "pyproject.toml", "README.md",
                            "flows", "tasks", "tmdlib"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, src / rel)
    _sh([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w",
         tmp / "dist", src], tmp, {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    (wheel,) = (tmp / "dist").glob("tmdsub-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    venv = tmp / "venv"
    _sh([sys.executable, "-m", "venv", venv], tmp, os.environ)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_shared_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _sh([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel], tmp,
        {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    dvc = venv / "bin" / "dvc"  # the console script `pip install tmdsub` would bring with dvc
    dvc.write_text(f"#!{py}\nimport sys\nfrom dvc.cli import main\nsys.exit(main())\n")
    dvc.chmod(0o755)
    return venv, site


def _package_files(site: Path) -> list:
    return sorted(str(p) for name in ("flows", "tasks", "tmdlib") for p in (site / name).rglob("*"))


def _pool_sdf(path: Path) -> dict:
    """``N`` MoleculeACE molecules as a vendor's SD file (ID property, supplier, title) plus one broken record;
    returns compound id -> measured value (the lab's truth)."""
    from rdkit import Chem

    rows = list(csv.DictReader(open(RAW / "MoleculeACE" / "CHEMBL204_Ki.csv", newline="")))[:N]
    blocks = []
    for i, r in enumerate(rows):
        block = Chem.MolToMolBlock(Chem.MolFromSmiles(r["smiles"])).split("\n", 1)[1]
        blocks.append(f"vendor-{i}\n{block}> <Compound ID>\nCPD-{i:04d}\n\n> <Supplier>\nacme\n\n$$$$\n")
        if i == 10:  # a record whose counts line is garbage
            blocks.append("broken\n  junk\n\ngarbage\nM  END\n> <Compound ID>\nCPD-BAD\n\n$$$$\n")
    path.write_text("".join(blocks))
    return {f"CPD-{i:04d}": r["y"] for i, r in enumerate(rows)}


def test_the_production_walk_in_a_project_made_by_tmdsub_init_from_the_wheel(tmp_path):
    before = _checkout_state()
    venv, site = _fresh_venv(tmp_path, _wheel(tmp_path))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLFLOW_TRACKING_URI", "PREFECT_API_URL",
                                                            "PREFECT_HOME", "TMDSUB_WORKSPACE", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t", DVC_NO_ANALYTICS="1")
    py = venv / "bin" / "python"
    where = _sh([py, "-c", "import flows, tasks, tmdlib; print(flows.__file__, tasks.__file__, tmdlib.__file__)"],
                tmp_path, env).stdout.split()
    assert all(w.startswith(str(venv)) for w in where), where
    installed = _package_files(site)
    assert any(f.endswith("flows/templates/dvc.yaml") for f in installed)

    proj = tmp_path / "team" / "project"
    res = _sh(["tmdsub", "init", proj], tmp_path, env)
    assert "git and dvc initialised" in res.stdout
    assert (proj / ".git").is_dir() and (proj / ".dvc").is_dir() and (proj / "data" / "raw").is_dir()
    version = _sh(["tmdsub", "--version"], tmp_path, env).stdout.strip()
    params_text = (proj / "params.yaml").read_text()
    assert f'version: "{version}"' in params_text
    truth = _pool_sdf(proj / "data" / "raw" / "vendor_pool.sdf")
    params_text = params_text.replace("  datasets: {}", "  datasets: {POOL: vendor_pool.sdf}", 1)
    (proj / "params.yaml").write_text(params_text.replace("  fraction: 0.1 ", "  fraction: 0.2 ", 1)
                                      .replace("fractions: 0.05,0.1,0.2,0.5", "fractions: 0.2", 1))

    res = _sh(["dvc", "repro", "label_requests@POOL"], proj, env)
    assert "Running stage 'train@POOL'" not in res.stdout
    requests = list(csv.DictReader(open(proj / "data" / "labels" / "POOL" / "label_requests.csv", newline="")))
    assert requests and all(r["compound_id"] in truth for r in requests)
    invalid = list(csv.DictReader(open(proj / "data" / "graphs" / "POOL.invalid.csv", newline="")))
    assert len(invalid) == 1 and "SD record 12 ('broken')" in invalid[0]["reason"]
    assert f"\n{requests[0]['compound_id']}\n" in (proj / "data" / "labels" / "POOL" / "label_requests.sdf").read_text()

    (proj / "lab").mkdir()
    (proj / "lab" / "answers.csv").write_text("Compound ID;pKi\n" + "".join(
        f"{r['compound_id']};{truth[r['compound_id']]}\n" for r in requests))
    params = yaml.safe_load((proj / "params.yaml").read_text())
    assert params["labels"]["source"] == "benchmark-standin"
    (proj / "params.yaml").write_text((proj / "params.yaml").read_text().replace(
        "  source: benchmark-standin", "  source: {POOL: lab/answers.csv}", 1))
    res = _sh(["dvc", "repro"], proj, env)
    assert "Running stage 'predict@POOL'" in res.stdout
    preds = list(csv.DictReader(open(proj / "data" / "predictions" / "POOL" / "predictions.csv", newline="")))
    assert len(preds) == N and {p["compound_id"] for p in preds} == set(truth)
    assert all(float(p["lower"]) <= float(p["prediction"]) <= float(p["upper"]) for p in preds)
    assert (proj / "data" / "audit" / "POOL" / "report.html").is_file()
    assert (proj / "mlflow.db").is_file() and (proj / ".prefect").is_dir() and (proj / "dvc.lock").is_file()
    assert "Data and pipelines are up to date" in _sh(["dvc", "status"], proj, env).stdout

    assert _package_files(site) == installed, "files written into the installed package"
    assert _checkout_state() == before, "the walk wrote into the checkout"
