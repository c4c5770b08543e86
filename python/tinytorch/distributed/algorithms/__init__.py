"""tinytorch.distributed.algorithms: training techniques layered over the distributed runtime
(`_checkpoint`: activation checkpointing and offloading wrappers, as torchtitan and FSDP users apply them)."""
