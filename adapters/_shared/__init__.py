"""Code the workload scripts of several frameworks share. It runs inside the frameworks' envs,
so it imports only the standard library (and, where it says so, `mlperf_loadgen`)."""
