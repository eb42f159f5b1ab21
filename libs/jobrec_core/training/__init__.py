"""Stage 4: DRMM training (Petastorm, DDP via TorchDistributor or torchrun, MLflow) and
promotion."""
