"""The GPU worker side: gpu_tasks.py and gpu_worker.py serve the GPU queues and import no model and
no database code; pools.py (which pools workers serve), broker.py (what the broker still holds) and
supervisor.py (the demo's processes) are the web side's view of them."""
