"""The comm probe: allreduce latency with torch.distributed, before the engine starts.

options.py      protocols, dtypes and sizes (CommError; no torch)
ranks.py        the ranks' processes: start, join a process group, collect their results
sweep.py        allreduces alone, per size, eager and in CUDA graphs (like nccl-tests)
interleaved.py  an allreduce's marginal cost inside a proxy decode step
latency.py      the one figure a job needs (interleaved on GPUs, else the sweep)
cli.py          `python -m runners comm`

Each module imports only those above it in this list.
"""
