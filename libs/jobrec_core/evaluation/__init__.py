"""Stage 5a: the paper's protocol, the learning curve and ground truth, metrics and the report."""
