"""tae-train's model and training loop in plain PyTorch: the reference tae-train is checked
against, and the `train.engine = "torch"` engine that runs the same spec on an XLA device (Cloud
TPU VMs), on CUDA, or on the CPU. docs/engine.md is the contract both engines implement."""
