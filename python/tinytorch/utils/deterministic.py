"""torch.utils.deterministic: with deterministic algorithms on, PyTorch fills new uninitialised memory (empty(),
empty_like()) with NaN (integers: their maximum) when fill_uninitialized_memory is True."""
fill_uninitialized_memory = True
