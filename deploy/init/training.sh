#!/bin/bash
# Init script of the training cluster (deploy/databricks.yml, gpu_cluster): Petastorm and the
# pyarrow it runs with. docs/DEPLOY.md, "The wheel on the runtime", says why:
# - Petastorm 0.13.1 calls pyarrow's ParquetDataset(validate_schema=...), which pyarrow 15
#   removed; Databricks Runtime 16.4 LTS ML ships pyarrow 15.0.2. The training cluster alone
#   gets 14.0.2 (Spark 3.5's Arrow conversions support it).
# - Petastorm declares pyspark and setuptools<70 as requirements; installed with them, pip
#   would put a second Spark next to the runtime's and downgrade setuptools. Its real
#   dependencies are on the runtime (dill, future, psutil, pyzmq, six, fsspec, packaging),
#   except diskcache.
set -euo pipefail
/databricks/python/bin/pip install --no-deps --disable-pip-version-check \
  petastorm==0.13.1 diskcache==5.6.3 pyarrow==14.0.2
