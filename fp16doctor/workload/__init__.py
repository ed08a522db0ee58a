"""The seed workload. Runs in the target Python (3.5 in the oldest stack): stdlib, numpy, PIL, Keras."""
