"""Keeping candidate code away from everything else: processes, confinement and what crosses between them.

forkserver.py (started by forkserver_launch.py, warmed by warmup.py) forks one fresh process per
candidate; candidate_process.py is the judge's handle on it; confine.py applies the OS's limits before
candidate code is imported (namespaces, a private /dev, capabilities dropped); memory_cap.py
caps its memory with a cgroup; env.py is the environment it gets; channel.py and cuda_ipc.py are what
crosses (JSON frames, shared memory, CUDA allocations by fd); processes.py kills process trees.
"""
