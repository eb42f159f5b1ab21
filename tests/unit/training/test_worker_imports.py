"""The training worker runs where only torch, Petastorm, numpy and pandas are installed: a
plain `torchrun` on a GPU node, or a TorchDistributor process. Spark, MLflow (unless a run is
tracked), gensim (unless the model gates on embeddings) and the configuration's pydantic are
the driver's business, so importing the worker must not need them."""

import subprocess
import sys
from pathlib import Path

LIBS = Path(__file__).resolve().parents[3] / "libs"

BLOCKER = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {"pyspark", "py4j", "delta", "mlflow", "gensim", "pydantic"}:
            raise ImportError("the worker imported " + name)
sys.meta_path.insert(0, Refuse())
import jobrec_core.training.worker, jobrec_core.training.scoring
from jobrec_core.platform.logs import setup_logging
setup_logging()  # what train_worker calls first
print("imported")
"""


def test_the_worker_imports_without_spark_mlflow_gensim_or_pydantic():
    done = subprocess.run(
        [sys.executable, "-c", BLOCKER],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(LIBS), "PATH": ""},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "imported"
